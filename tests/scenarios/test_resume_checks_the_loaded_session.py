"""``resume_agent`` refuses what a store's ``load`` should never return (SPEC R11.9, R11.15)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from retinue import StoreError
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel, check_session_invariants
from tests.helpers import DEADLINE, OPTIONS, runtime


class _UnrepairingStore(DelegatingStore):
    """Loads a session as if its last turn had crashed and ``load`` had not closed it."""

    cut = 0
    returns: object = None

    async def load(self, session_id: str) -> Session:
        loaded = await self.store.load(session_id)
        if self.returns is not None:
            return self.returns  # type: ignore[return-value]
        kept = loaded.events[: len(loaded.events) - self.cut]
        return Session.from_events(loaded.header, kept)


async def test_a_load_leaving_a_turn_open_is_refused_naming_the_session_and_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R11.9: a session a store's ``load`` leaves inside a crashed turn is refused as
    ``StoreError(OPEN_TURN)``, and the store keeps it: resumed, every later turn of the agent would
    fail as opened inside the open one (``TURN_NOT_OPENED``)."""
    store = _UnrepairingStore(MemoryStore())
    with trio.fail_after(DEADLINE):
        async with runtime(ScriptedModel([Reply("hi")], repeat_last=True), store=store) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            await agent.ask("first")
            await agent.dispose()
            store.cut = 2  # the step's and the turn's end
            with pytest.raises(StoreError, match=r"left turn 1 open") as refused:
                await rt.resume_agent(agent.id, OPTIONS)
            assert refused.value.code == "OPEN_TURN"
            assert agent.id in str(refused.value)
            store.cut = 0
            resumed = await rt.resume_agent(agent.id, OPTIONS)
            result = await resumed.ask("second")
    assert result.reason.kind == "completed"
    check_session_invariants(resumed.session.events)


async def test_a_load_returning_no_session_is_refused_naming_what_it_returned(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R11.15: a ``load`` that returns no Session is ``StoreError(CORRUPT_SESSION)`` naming what it
    returned, not a later AttributeError naming no store."""
    store = _UnrepairingStore(MemoryStore())
    with trio.fail_after(DEADLINE):
        async with runtime(ScriptedModel([Reply("hi")]), store=store) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            await agent.ask("first")
            await agent.dispose()
            store.returns = {"events": []}
            with pytest.raises(StoreError, match=r"returned \{'events': \[\]\}, not a Session"):
                await rt.resume_agent(agent.id, OPTIONS)


class _SwappingStore(DelegatingStore):
    """Loads the session *swap* names in place of the one asked for."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.swap: dict[str, str] = {}

    async def load(self, session_id: str) -> Session:
        return await self.store.load(self.swap.get(session_id, session_id))


async def test_a_load_returning_another_sessions_log_is_refused_naming_both_ids(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R11.15: a ``load`` of one id that returns the session of another is
    ``StoreError(CORRUPT_SESSION)`` naming both, not a bare ``KeyError``; the claim its load
    took is let go, so the other id resumes after it."""
    store = _SwappingStore()
    with trio.fail_after(DEADLINE):
        async with runtime(ScriptedModel([Reply("hi")], repeat_last=True), store=store) as rt:
            for session_id in ("s", "other"):
                agent = await rt.create_agent("a", OPTIONS, session_id=session_id)
                await agent.ask("first")
                await agent.dispose()
            store.swap = {"s": "other"}
            with pytest.raises(StoreError, match=r"'s' returned the session 'other'") as refused:
                await rt.resume_agent("s", OPTIONS)
            assert refused.value.code == "CORRUPT_SESSION"
            assert len(rt.agents) == 0
            resumed = await rt.resume_agent("other", OPTIONS)
            assert resumed.session.last_turn == 1
