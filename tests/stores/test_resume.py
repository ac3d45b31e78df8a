"""Resume through the runtime on every store (R11.15-R11.18)."""

from __future__ import annotations

import trio

import retinue
from retinue.session import RequestHeader, Session, TurnEnd, TurnStart
from retinue.testing import Reply, ScriptedModel, check_history_replay, check_session_invariants
from tests.stores._kit import lines, open_tool_turn, run_turn
from tests.stores.conftest import StoreKit

OPTIONS = retinue.AgentOptions(model="m")


def _model() -> ScriptedModel:
    return ScriptedModel([Reply("noted", chunks=3)], repeat_last=True)


def _turn_starts(session: Session) -> list[int]:
    return [event.data.turn for event in session.events if isinstance(event.data, TurnStart)]


def _headers_after(session: Session, seq: int) -> list[str]:
    return [
        event.data.reason for event in session.events[seq:] if isinstance(event.data, RequestHeader)
    ]


async def test_resume_continues_seqs_turns_and_logs_a_resume_header(kit: StoreKit) -> None:
    """R11.16: after resume seqs continue, turn numbers continue, history replays, header says resume."""
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            agent = await rt.create_agent("writer", OPTIONS, session_id="resumable")
            await agent.ask("first")
            await agent.ask("second")
            before = lines(agent.session.events[:])
            await agent.dispose()
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            again = await rt.resume_agent("resumable", OPTIONS)
            assert lines(again.session.events[:]) == before
            result = await again.ask("third")
            assert result.reason.kind == "completed"
            session = again.session
    assert _turn_starts(session) == [1, 2, 3]
    assert _headers_after(session, len(before)) == ["resume"]
    check_session_invariants(session.events)
    check_history_replay(session.events)
    assert list(session.derive_messages()) == list(
        Session.from_events(session.header, session.events[:]).derive_messages()
    )
    async with kit.open() as store:
        stored = await store.load("resumable")
    assert lines(stored.events[:]) == lines(session.events[:])


async def test_resume_after_a_crash_closes_the_turn_and_goes_on(kit: StoreKit) -> None:
    """R11.9, R11.15: a crashed open turn is closed on load; the resumed agent runs the next turn."""
    crashed = Session.create("crashed-agent")
    async with kit.open() as store:
        store.attach_new(crashed)
        run_turn(crashed)
        open_tool_turn(crashed)
        await store.flush(crashed)
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            agent = await rt.resume_agent("crashed-agent", OPTIONS)
            repaired = agent.session.events[len(crashed.events) :]
            end = repaired[-1].data
            assert isinstance(end, TurnEnd)
            assert end.reason.kind == "interrupted"
            result = await agent.ask("are you back?")
            assert result.reason.kind == "completed"
            session = agent.session
    assert _turn_starts(session) == [1, 2, 3]
    check_session_invariants(session.events)
    check_history_replay(session.events)
