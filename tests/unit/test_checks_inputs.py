"""What the log checkers take: any iterable of events, walked in full by every check."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest
import trio
import trio.testing

from retinue import SessionError
from retinue._content import ToolCall
from retinue.session import AssistantMessage, Event, StepEnd, StepStart, TurnEnd, TurnStart
from retinue.testing import (
    InvariantError,
    Reply,
    ScriptedModel,
    check_history_replay,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.helpers import OPTIONS, runtime
from tests.unit.test_checks import DONE, TRIGGER, good_log, log

CHECKERS: list[Callable[[Iterable[Event]], None]] = [
    check_session_invariants,
    check_no_dangling_tool_calls,
    check_history_replay,
]


def dangling_call() -> list[Event]:
    """A step whose tool call never gets its result."""
    return log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)),
        StepEnd(1, 1),
        TurnEnd(1, DONE),
    )


@pytest.mark.parametrize("check", CHECKERS)
def test_a_log_given_as_an_iterator_is_checked_in_full(
    check: Callable[[Iterable[Event]], None],
) -> None:
    """R9.25, R5.4: every pass of a checker sees the whole log, however it is given.

    A first pass must not use an iterator up: check_session_invariants must still find this dangling
    call, and check_history_replay must not fail every log as diverging.
    """
    with pytest.raises(InvariantError, match=r"'c1'.* has no result"):
        check(iter(dangling_call()))


def test_a_valid_log_given_as_an_iterator_replays() -> None:
    """R5.6: a well-formed log passes the replay check given as a generator too."""
    check_history_replay(event for event in good_log())


@pytest.mark.parametrize("check", CHECKERS)
async def test_a_session_is_refused_naming_its_events(
    check: Callable[[object], None], autojump_clock: trio.testing.MockClock
) -> None:
    """A session is no log: the error says to pass ``session.events``, rather than one checker
    saying the log cannot be replayed (an InvariantError, as if the log broke a rule) and the others
    that a Session is not iterable.
    """
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi")
    check(agent.session.events)
    with pytest.raises(TypeError, match=r"not a session: pass session\.events"):
        check(agent.session)


@pytest.mark.parametrize("check", CHECKERS)
def test_items_that_are_not_events_are_refused_by_index(check: Callable[[object], None]) -> None:
    """Events read back as JSON objects are refused as such, not with an AttributeError."""
    with pytest.raises(TypeError, match=r"item 0 is a dict"):
        check([{"type": "turn/start", "seq": 0}])


def test_a_session_id_that_is_no_id_is_not_reported_as_the_logs_fault() -> None:
    """R5.6 names a log that cannot be replayed; a wrong ``session_id`` is the caller's mistake:
    ``session_id=None`` is refused as such, not a well-formed log failed with "the log cannot be
    replayed".
    """
    with pytest.raises(SessionError, match=r"id must be a str, got None"):
        check_history_replay(good_log(), session_id=None)  # type: ignore[arg-type]
