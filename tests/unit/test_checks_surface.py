"""Surface ops in the log checker: it takes and refuses exactly what a rebuilt session does.

R4.6 (a surface event's op is ``"append"`` or a :class:`Replace`), R4.19 (a replace names
a range of the current surface, start not after end, every replaced node among its
``source_event_seqs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pytest

from retinue._content import Text, ToolCall
from retinue._errors import SessionError
from retinue.session import (
    SURFACE_TYPES,
    AssistantMessage,
    ContextMessage,
    Event,
    EventData,
    Replace,
    Session,
    SessionHeader,
    StepEnd,
    StepStart,
    SurfaceOp,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.testing import (
    InvariantError,
    check_history_replay,
    check_no_dangling_tool_calls,
    check_session_invariants,
)

DONE = TurnEndReason.completed()

Rewrite = tuple[EventData, object, Sequence[int] | None]
"""A surface event logged with the given op (of any value) and source seqs."""


def text(value: str) -> tuple[Text]:
    return (Text(value),)


def logged(*items: EventData | Rewrite) -> list[Event]:
    """Events with seq = index; surface types append unless given as a :data:`Rewrite`."""
    events = []
    for seq, item in enumerate(items):
        if type(item) is tuple:
            data, op, sources = cast("Rewrite", item)
        else:
            data = cast("EventData", item)
            op, sources = ("append" if data.type in SURFACE_TYPES else None), None
        surface = cast("SurfaceOp | None", op)
        events.append(Event(seq, 0, data, None if sources is None else tuple(sources), surface))
    return events


def prompts(*tail: EventData | Rewrite) -> list[Event]:
    """A turn with prompts ``a``, ``b``, ``c`` on the surface at seqs 1-3, then *tail*."""
    return logged(
        TurnStart(1, TurnTrigger("message")),
        UserMessage(text("a")),
        UserMessage(text("b")),
        UserMessage(text("c")),
        *tail,
    )


def summary(start: int, end: int, sources: Sequence[int] | None) -> Rewrite:
    return (UserMessage(text("summary")), Replace(start, end), sources)


def assert_refused(events: list[Event], seq: int, rule: str, message: str) -> None:
    """The checker names *seq* and *rule*; a rebuilt session refuses the same event."""
    with pytest.raises(InvariantError, match=rf"^seq {seq} \([a-z/]+\): {rule}: {message}"):
        check_session_invariants(events)
    with pytest.raises(SessionError, match=rf"^event seq {seq} ") as refused:
        Session.from_events(SessionHeader("s", 0), events)
    assert refused.value.code == "INVALID_SURFACE_OP"


def assert_accepted(events: list[Event]) -> None:
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)


@pytest.mark.parametrize(
    "op",
    ["prepend", "", "Append", {"op": "replace", "start": 1, "end": 1}, (1, 1)],
    ids=["prepend", "empty", "capitalised", "wire-form-dict", "tuple"],
)
def test_r4_6_an_op_neither_append_nor_a_replace(op: object) -> None:
    """R4.6: a surface event's op is ``"append"`` or a :class:`Replace`, nothing else."""
    events = prompts((UserMessage(text("d")), op, None), TurnEnd(1, DONE))
    assert_refused(events, 4, r"R4\.6", r"surface op .* is neither")


@pytest.mark.parametrize(
    ("start", "end"),
    [(99, 2), (1, 99), (0, 2), (2, 4)],
    ids=["start-unknown", "end-unknown", "start-not-surface", "end-is-itself"],
)
def test_r4_19_a_replace_whose_range_is_not_on_the_surface(start: int, end: int) -> None:
    """R4.19: both ends of a replace are seqs on the current surface."""
    events = prompts(summary(start, end, (1, 2, 3)), TurnEnd(1, DONE))
    assert_refused(events, 4, r"R4\.19", rf"replace range {start}\.\.{end} is not on the surface")


def test_r4_19_a_replace_whose_start_comes_after_its_end() -> None:
    """R4.19: the start of a replace is not after its end in surface order."""
    events = prompts(summary(3, 1, (1, 2, 3)), TurnEnd(1, DONE))
    assert_refused(events, 4, r"R4\.19", r"replace start 3 is after its end 1")


def test_r4_19_surface_order_is_not_seq_order() -> None:
    """R4.19: the order that counts is the surface's: the summary at seq 5 stands before
    seq 3 and 4, so a replace from 4 to 5 is reversed and one from 5 to 4 covers seq 3 too."""
    head = (UserMessage(text("d")), summary(1, 2, (1, 2)))
    reversed_range = prompts(*head, summary(4, 5, (3, 4, 5)), TurnEnd(1, DONE))
    assert_refused(reversed_range, 6, r"R4\.19", r"replace start 4 is after its end 5")
    skipped = prompts(*head, summary(5, 4, (4, 5)), TurnEnd(1, DONE))
    assert_refused(skipped, 6, r"R4\.19", r"source_event_seqs miss replaced seq 3\b")
    assert_accepted(prompts(*head, summary(5, 4, (3, 4, 5)), TurnEnd(1, DONE)))


@pytest.mark.parametrize(
    ("sources", "missing"),
    [((1,), 2), ((1, 3), 2), ((2, 3), 1), ((1, 2), 3), (None, 1)],
    ids=["first-only", "middle", "start", "end", "none"],
)
def test_r4_19_sources_that_miss_a_replaced_node(
    sources: tuple[int, ...] | None, missing: int
) -> None:
    """R4.19: ``source_event_seqs`` name every node a replace removes."""
    events = prompts(summary(1, 3, sources), TurnEnd(1, DONE))
    assert_refused(events, 4, r"R4\.19", rf"source_event_seqs miss replaced seq {missing}\b")


def test_r4_19_a_second_replace_of_seqs_already_replaced() -> None:
    """R4.19: a replaced node is off the surface, so a later replace cannot name it."""
    events = prompts(summary(1, 2, (1, 2)), summary(1, 2, (1, 2)), TurnEnd(1, DONE))
    assert_refused(events, 5, r"R4\.19", r"replace range 1\.\.2 is not on the surface")


def test_r4_19_a_replace_of_a_node_inside_a_replaced_range() -> None:
    """R4.19: no node of a replaced range stays on the surface, the middle one included."""
    events = prompts(summary(1, 3, (1, 2, 3)), summary(2, 2, (2,)), TurnEnd(1, DONE))
    assert_refused(events, 5, r"R4\.19", r"replace range 2\.\.2 is not on the surface")


def test_accepts_a_single_replace() -> None:
    """R4.19: a replace of surface nodes in order, each among its sources, passes."""
    assert_accepted(prompts(summary(1, 3, (1, 2, 3)), TurnEnd(1, DONE)))
    assert_accepted(prompts(summary(2, 2, (2,)), TurnEnd(1, DONE)))


def test_accepts_sources_naming_more_than_the_replaced_nodes() -> None:
    """R4.19, R4.22: sources include every replaced node; others, earlier ones, may be named."""
    assert_accepted(prompts(summary(2, 3, (0, 1, 2, 3)), TurnEnd(1, DONE)))


def test_accepts_a_replace_spanning_context_and_tool_results() -> None:
    """R4.19, R4.20: compaction of a whole turn (prompt, assistant message, tool result,
    context) skips the events off the surface (``tool/call``, boundaries) it lies across."""
    events = logged(
        TurnStart(1, TurnTrigger("message")),
        UserMessage(text("go")),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)),
        ToolCallEvent(1, 1, "c1", "t", "{}"),
        (ToolResultEvent(1, 1, "c1", text("ok")), "append", (4,)),
        ContextMessage(text("context")),
        StepEnd(1, 1),
        TurnEnd(1, DONE),
        TurnStart(2, TurnTrigger("message")),
        summary(1, 6, (1, 3, 5, 6)),
        UserMessage(text("again")),
        TurnEnd(2, DONE),
    )
    assert_accepted(events)
    history = Session.from_events(SessionHeader("s", 0), events).derive_messages()
    assert [message.content for message in history] == [text("summary"), text("again")]


def test_accepts_replaces_after_replaces() -> None:
    """R4.19: replaces of disjoint ranges pass, and so does one of a range holding a summary."""
    events = prompts(
        UserMessage(text("d")),
        UserMessage(text("e")),
        summary(1, 2, (1, 2)),
        summary(4, 5, (4, 5)),
        summary(3, 3, (3,)),
        summary(6, 7, (6, 7, 8)),
        summary(9, 9, (9,)),
        TurnEnd(1, DONE),
    )
    assert_accepted(events)
    history = Session.from_events(SessionHeader("s", 0), events).derive_messages()
    assert [message.content for message in history] == [text("summary")]
