"""The relations between a step's events that a loaded log is held to (R7.36, R9.10, R4.15,
R9.17): a loop's log and a crashed one closed by repair keep them; a changed one is named."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retinue.session import Event, Session
from retinue.session._steplinks import BrokenStepError, check_step_links
from retinue.stores import repair_tail
from tests.stores._kit import open_tool_turn, run_turn


def _log() -> list[Event]:
    session = Session.create("links")
    run_turn(session)
    return list(session.events)


def _index(events: list[Event], kind: str) -> int:
    return next(index for index, event in enumerate(events) if event.type == kind)


def _drop_a_source(events: list[Event]) -> int:
    at = _index(events, "assistant/message")
    sources = events[at].source_event_seqs
    assert sources is not None
    events[at] = events[at]._replace(source_event_seqs=sources[:-1])
    return at


def _source_another_event(events: list[Event]) -> int:
    at = _index(events, "tool/result")
    events[at] = events[at]._replace(source_event_seqs=(0,))
    return at


def _drop_the_result(events: list[Event]) -> int:
    at = _index(events, "tool/result")
    del events[at]
    return at  # the step/end that now follows the call


def _drop_the_call(events: list[Event]) -> int:
    at = _index(events, "tool/call")
    del events[at]
    return at  # the result that now follows the message


DAMAGES: dict[str, tuple[Callable[[list[Event]], int], str]] = {
    "a message not sourced from its step's chunks": (_drop_a_source, "R7.36"),
    "a result sourced from another event": (_source_another_event, "R9.17"),
    "a call left unanswered at its step's end": (_drop_the_result, "R4.15"),
    "a result of no call": (_drop_the_call, "R4.15"),
}


def test_a_loops_log_and_a_repaired_crash_keep_the_step_links() -> None:
    """A finished turn, then one cut off after its tool call: open, and closed by repair."""
    session = Session.create("crashed")
    run_turn(session)
    open_tool_turn(session)
    check_step_links(session.events)
    check_step_links([*session.events, *repair_tail(session.events)])


@pytest.mark.parametrize(("damage", "rule"), DAMAGES.values(), ids=DAMAGES.keys())
def test_a_step_whose_events_disagree_is_refused_naming_the_event(
    damage: Callable[[list[Event]], int], rule: str
) -> None:
    events = _log()
    at = damage(events)
    with pytest.raises(BrokenStepError) as caught:
        check_step_links(events)
    assert caught.value.seq == events[at].seq
    assert caught.value.message.startswith(f"seq {events[at].seq} ({events[at].type}): {rule}: ")
