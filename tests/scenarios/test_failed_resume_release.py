"""A failed resume gives its claim on the session back within ``flush_timeout``, however
long the store takes (SPEC R12.4, R12.6, R12.10)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

import retinue
from retinue import StoreError
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.stores._writebehind import BufferedStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime
from tests.stores._kit import OutageBackend

STORE_ANSWERS_AFTER = 10_000.0


class _HangingRelease(DelegatingStore):
    """A store whose detach answers only after a long while once ``hanging`` is set."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.hanging = False

    async def detach(self, session: Session) -> None:
        if self.hanging:
            await trio.sleep(STORE_ANSWERS_AFTER)
        await self.store.detach(session)


def failing_setup(_agent: retinue.Agent) -> None:
    raise ValueError("the setup failed")


async def test_a_failed_resume_behind_a_hanging_store_ends_within_flush_timeout(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.6, R12.10: the setup's failure is raised once ``flush_timeout`` has passed and the
    release is logged: the shielded release does not wait for the store however long it takes,
    holding the runtime's close with it (for good, for a store that never answers)."""
    store = _HangingRelease(MemoryStore())
    async with runtime(ScriptedModel([Reply("hi")]), store=store, flush_timeout=5.0) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("stored")
        await agent.dispose()
        store.hanging = True
        began = trio.current_time()
        with (
            caplog.at_level(logging.ERROR, logger="retinue.supervisors"),
            pytest.raises(ValueError, match="the setup failed"),
        ):
            await rt.resume_agent(agent.id, OPTIONS, setup=failing_setup)
        assert trio.current_time() - began == 5.0
        assert f"releasing session {agent.id} after a failed resume failed" in caplog.text


async def test_a_resume_after_a_release_that_timed_out_settles_it_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.6, R11.5: a release the store did not answer in time is kept and tried again by the next
    resume of the id, which then resumes the session, rather than every later resume failing
    SESSION_TRACKED with the session still loaded and never let go."""
    store = _HangingRelease(MemoryStore())
    async with runtime(ScriptedModel([Reply("hi")]), store=store, flush_timeout=5.0) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("stored")
        await agent.dispose()
        store.hanging = True
        with pytest.raises(ValueError, match="the setup failed"):
            await rt.resume_agent(agent.id, OPTIONS, setup=failing_setup)
        with pytest.raises(StoreError, match=r"^the release of a failed resume's claim is still"):
            await rt.resume_agent(agent.id, OPTIONS)  # the store hangs still
        store.hanging = False
        resumed = await rt.resume_agent(agent.id, OPTIONS)
        assert resumed.status == "idle"
        assert [e.type for e in resumed.session.events][:3] == [
            e.type for e in agent.session.events
        ][:3]


async def test_two_closes_at_once_settle_a_failed_final_flush_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: two concurrent ``aclose`` calls both retry the failed final flush; the one that finds
    it settled by the other lets it be, without a KeyError."""
    backend = OutageBackend()
    store = BufferedStore(backend, name="outage")  # type: ignore[arg-type]
    async with store:
        async with runtime(ScriptedModel([Reply("hi")]), store=store) as rt:
            agent = await rt.create_agent("w", OPTIONS)
            await agent.ask("hello")
            agent.inject("a note the final flush carries")
            backend.down = True
            await agent.dispose()
            backend.down = False
            async with trio.open_nursery() as nursery:
                nursery.start_soon(rt.aclose)
                nursery.start_soon(rt.aclose)
            assert store.statistics().buffered_events == 0
        loaded = await store.load(agent.id)
        assert [e.type for e in loaded.events] == [e.type for e in agent.session.events]


class _TakenOverRelease(DelegatingStore):
    """A store whose detach says the session was taken over once ``taken`` is set."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.taken = False

    async def detach(self, session: Session) -> None:
        await self.store.detach(session)
        if self.taken:
            raise StoreError("taken over by a later load", code="SESSION_TAKEN_OVER")


async def test_a_failed_resumes_release_dropped_by_the_store_is_named_as_a_release(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.6: the warning that the store dropped the session names the claim release that failed,
    not the session's final flush."""
    store = _TakenOverRelease(MemoryStore())
    async with runtime(ScriptedModel([Reply("hi")]), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("stored")
        await agent.dispose()
        store.taken = True
        with (
            caplog.at_level(logging.WARNING, logger="retinue.supervisors"),
            pytest.raises(ValueError, match="the setup failed"),
        ):
            await rt.resume_agent(agent.id, OPTIONS, setup=failing_setup)
        store.taken = False
    assert (
        f"session {agent.id} was dropped from this runtime, the release of a failed "
        "resume's claim having failed" in caplog.text
    )
