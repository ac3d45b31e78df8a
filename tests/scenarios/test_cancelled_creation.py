"""Creations cancelled before publication leave nothing behind (R12.4, R12.5).

Without a ``setup``, a creation still passes one checkpoint where a setup would
run. A caller cancelled there keeps no agent, and the runtime keeps nothing for
it either. What it would keep is its table of per-agent cleanups, which nothing
public exposes or is affected by (a later agent of the same id starts a fresh
table): the test reads that table, the one private attribute it touches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import retinue
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime

ATTEMPTS = 20


class _CancellingStore(DelegatingStore):
    """Cancels ``scope`` once ``exists`` or ``load`` has answered: the caller's next
    checkpoint, the setup's, is where the creation gives up."""

    scope: trio.CancelScope | None = None

    async def exists(self, session_id: str) -> bool:
        found: bool = await self.store.exists(session_id)
        self._cancel()
        return found

    async def load(self, session_id: str) -> Session:
        session = await self.store.load(session_id)
        self._cancel()
        return session

    def _cancel(self) -> None:
        if self.scope is not None:
            self.scope.cancel()


Create = Callable[[retinue.Runtime], Awaitable[retinue.Agent]]


async def _create(rt: retinue.Runtime) -> retinue.Agent:
    return await rt.create_agent("a", OPTIONS, session_id="a")


async def _resume(rt: retinue.Runtime) -> retinue.Agent:
    return await rt.resume_agent("a", OPTIONS)


async def _start_forked(rt: retinue.Runtime) -> retinue.Agent:
    return await rt.start_forked(rt.fork_agent_session("source", "a"), OPTIONS)


async def _prepare(rt: retinue.Runtime, create: Create) -> None:
    """What each way of creating needs: a stored session to resume, a live one to fork."""
    if create is _resume:
        stored = await rt.create_agent("a", OPTIONS, session_id="a")
        await stored.ask("hi")
        await stored.dispose()
    elif create is _start_forked:
        source = await rt.create_agent("source", OPTIONS, session_id="source")
        await source.ask("hi")


@pytest.mark.parametrize(
    "create", [_create, _resume, _start_forked], ids=["create", "resume", "start_forked"]
)
async def test_a_creation_cancelled_at_its_setup_checkpoint_leaves_nothing(
    autojump_clock: trio.testing.MockClock, create: Create
) -> None:
    """R12.4, R12.5: cancelled at the checkpoint where a setup would run, each creation
    ends unpublished and the runtime keeps nothing for it; the id is free again.
    """
    store = _CancellingStore(MemoryStore())
    model = ScriptedModel([Reply("hi")], repeat_last=True)
    async with runtime(model, store=store) as rt:
        await _prepare(rt, create)
        live = len(rt.agents)
        for _ in range(ATTEMPTS):
            with trio.CancelScope() as store.scope:
                await create(rt)
            assert store.scope.cancelled_caught
            assert len(rt.agents) == live
        store.scope = None
        assert "a" not in rt._cleanups
        agent = await create(rt)
        assert (await agent.ask("again")).reason.kind == "completed"
