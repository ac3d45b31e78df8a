"""A failed resume leaves nothing behind: no listener scoped to it, no event its setup appended."""

from __future__ import annotations

import contextlib

import pytest
import trio
import trio.testing

import retinue
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


class _SlowRelease(DelegatingStore):
    """A store whose detach takes a while once ``slow`` is set, announcing that it started."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.slow = False
        self.releasing = trio.Event()

    async def detach(self, session: Session) -> None:
        if self.slow:
            self.releasing.set()
            await trio.sleep(1)
        await self.store.detach(session)


async def test_a_listener_scoped_to_a_failed_resume_is_not_heard_by_a_later_agent_of_its_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.5, R12.6: a setup failure publishes nothing, and nothing scoped to its handle
    afterwards (by a task the setup started) is left for a later agent of that id."""
    store = _SlowRelease(MemoryStore())
    heard: list[str] = []
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True), store=store) as rt:
        first = await rt.create_agent("a", OPTIONS)
        await first.ask("one")
        await first.dispose()

        async def scope_late(agent: retinue.Agent) -> None:
            await store.releasing.wait()
            # Refused, or removed with the failed creation: either way never heard.
            with contextlib.suppress(retinue.AgentDisposedError):
                rt.hooks.on(
                    "agent/status", lambda _agent, status: heard.append(status), agent=agent
                )

        async with trio.open_nursery() as nursery:

            def setup(agent: retinue.Agent) -> None:
                nursery.start_soon(scope_late, agent)
                raise ValueError("setup failed")

            store.slow = True
            with pytest.raises(ValueError, match=r"setup failed"):
                await rt.resume_agent(first.id, OPTIONS, setup=setup)
        store.slow = False
        later = await rt.resume_agent(first.id, OPTIONS)
        await later.ask("two")
        await later.dispose()
    assert heard == []


async def test_what_a_failed_resumes_setup_appended_is_not_stored(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.6: a setup that fails publishes nothing, and stores nothing either: giving up the claim
    does not attach the session and detach it, which would write the events the setup had
    appended."""
    model = ScriptedModel([Reply("hi")], repeat_last=True)
    async with runtime(model, store=MemoryStore()) as rt:
        first = await rt.create_agent("a", OPTIONS)
        await first.ask("one")
        await first.dispose()
        stored = len(first.session.events)

        def setup(agent: retinue.Agent) -> None:
            agent.session.append_custom("x/note", {"from": "a failed setup"})
            raise ValueError("setup failed")

        with pytest.raises(ValueError, match=r"setup failed"):
            await rt.resume_agent(first.id, OPTIONS, setup=setup)
        again = await rt.resume_agent(first.id, OPTIONS)
        assert [event.type for event in again.session.events][stored:] == []
        await again.dispose()
