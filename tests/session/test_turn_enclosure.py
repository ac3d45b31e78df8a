"""Only a plugin's events may sit between turns (R4.11, R4.13).

Every built-in event but ``turn/start`` lies inside a turn: an append of one
between turns is refused with nothing logged or heard, and a seeded log
holding one does not load. A plugin's event may be logged between turns (a
setup restoring its state on resume, say): the invariant checker takes it,
and a fork may end on it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

import retinue
from retinue._errors import SessionError
from retinue._request import LlmCallConfig
from retinue.session import (
    CustomEvent,
    EpochHeader,
    Event,
    EventData,
    PromptBlocked,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SessionHeader,
    TurnStart,
    TurnTrigger,
)
from retinue.stores import MemoryStore
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.stores._kit import run_turn

HEADER = RequestHeader(EpochHeader(LlmCallConfig("m")), "initial")

OUTSIDE: dict[str, EventData] = {
    "prompt/blocked": PromptBlocked(content=(), reason="blocked"),
    "request/header": HEADER,
    "request/header-delta": RequestHeaderDelta(config=LlmCallConfig("n")),
}


def _after_one_turn() -> Session:
    """A session whose turn 1, with its header, is closed."""
    session = Session.create("s")
    run_turn(session)
    return session


@pytest.mark.parametrize("kind", list(OUTSIDE))
@pytest.mark.parametrize(
    "make", [lambda: Session.create("s"), _after_one_turn], ids=["new", "after-a-turn"]
)
def test_a_built_in_event_between_turns_is_refused(kind: str, make: Callable[[], Session]) -> None:
    """R4.13: before the first turn and after a closed one, nothing is logged or heard."""
    session = make()
    heard: list[Event] = []
    session.observe(heard.append)
    logged = len(session.events)
    with pytest.raises(SessionError) as caught:
        session.append(OUTSIDE[kind])
    assert (caught.value.code, str(caught.value)) == (
        "NO_OPEN_TURN",
        f"{kind} appended outside a turn",
    )
    assert (len(session.events), heard) == (logged, [])


@pytest.mark.parametrize("kind", list(OUTSIDE))
def test_a_seed_with_a_built_in_event_between_turns_does_not_load(kind: str) -> None:
    """R4.13, R4.24: a seed is validated like appends; the refusal names the seq."""
    events = list(_after_one_turn().events)
    events.append(Event(len(events), 0, OUTSIDE[kind]))
    with pytest.raises(SessionError) as caught:
        Session.from_events(SessionHeader("r", 0), events)
    assert (caught.value.code, str(caught.value)) == (
        "NO_OPEN_TURN",
        f"event seq {len(events) - 1} ({kind}): {kind} appended outside a turn",
    )


def test_a_plugin_event_between_turns_is_logged_and_checks_clean() -> None:
    """R4.11: a plugin's event may follow a closed turn and precede the next one."""
    session = _after_one_turn()
    note = session.append_custom("plugin/state", {"restored": True})
    run_turn(session)
    assert session.events[note.seq] == note
    check_session_invariants(session.events)
    assert Session.from_events(session.header, session.events).events[:] == session.events[:]


def test_a_fork_may_end_on_a_plugin_event_between_turns() -> None:
    """R4.25: no part of a turn is copied, so an omitted or named boundary there forks."""
    session = _after_one_turn()
    note = session.append_custom("plugin/state", {"restored": True})
    assert session.fork("omitted").events[:] == session.events[:]
    assert session.fork("named", note.seq).events[-1] == note
    empty = Session.create("e")
    first = empty.append_custom("plugin/state", {})
    assert empty.fork("first", first.seq).events[:] == (first,)


def test_a_fork_ending_on_a_plugin_event_inside_a_turn_is_refused() -> None:
    """R4.25: the turn the event lies in is open at the boundary (``OPEN_TURN``)."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    inside = session.append_custom("plugin/state", {})
    with pytest.raises(SessionError) as caught:
        session.fork("child", inside.seq)
    assert (caught.value.code, str(caught.value)) == (
        "OPEN_TURN",
        f"fork boundary {inside.seq} (plugin/state) lies inside a turn: fork at a turn/end",
    )


async def test_a_resumed_agent_whose_setup_logs_a_plugin_event_checks_clean_and_forks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.11, R4.13, R4.25: the setup's event lies between turns; the log it leaves passes
    the invariant checker, and a fork with no boundary copies it whole."""

    def setup(agent: retinue.Agent) -> None:
        agent.session.append_custom("plugin/state", {"restored": True})

    model = ScriptedModel([Reply("hi")], repeat_last=True)
    options = retinue.AgentOptions(model="scripted")
    with trio.fail_after(30):
        async with retinue.open_runtime(models=model, store=MemoryStore()) as rt:
            first = await rt.create_agent("a", options)
            await first.ask("one")
            await first.dispose()
            agent = await rt.resume_agent(first.id, options, setup=setup)
            events = agent.session.events[:]
            assert type(events[-1].data) is CustomEvent
            check_session_invariants(events)
            assert agent.session.fork("child").events[:] == events
            await agent.ask("two")
            check_session_invariants(agent.session.events)
