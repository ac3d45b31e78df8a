"""``DelegatingStore``: a subclass passes a watched call on with ``super()``."""

from __future__ import annotations

import pytest
import trio

import retinue
from retinue import AgentOptions, MemoryStore
from retinue.session import Session, SessionHeader
from retinue.testing import DelegatingStore, Reply, ScriptedModel


class _Counting(DelegatingStore):
    """Counts each call of the store seam, passing it on with ``super()``."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.calls: list[str] = []

    def attach_new(self, session: Session) -> None:
        self.calls.append("attach_new")
        super().attach_new(session)

    async def flush(self, session: Session) -> None:
        self.calls.append("flush")
        await super().flush(session)

    async def detach(self, session: Session) -> None:
        self.calls.append("detach")
        await super().detach(session)

    async def exists(self, session_id: str) -> bool:
        self.calls.append("exists")
        return await super().exists(session_id)

    async def load(self, session_id: str) -> Session:
        self.calls.append("load")
        return await super().load(session_id)

    async def list(self) -> list[SessionHeader]:
        self.calls.append("list")
        return await super().list()


async def test_a_subclass_passes_each_store_call_on_with_super(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R11.7: each overridden call reaches the wrapped store through ``super()``: the turn's
    flush stores the session, which a load, a listing and an existence check then read, where
    ``super().flush`` was an AttributeError caught as a failed flush, the turn still completed."""
    errors: list[BaseException] = []
    inner = MemoryStore()
    store = _Counting(inner)
    model = ScriptedModel([Reply("a"), Reply("b")])
    with trio.fail_after(60):
        async with retinue.open_runtime(models=model, store=store) as rt:
            rt.hooks.on("agent/error", lambda *args: errors.append(args[-1]))
            agent = await rt.create_agent("w", AgentOptions(model="scripted"), session_id="w")
            assert (await agent.ask("one")).reason.kind == "completed"
            await agent.dispose()
            assert await store.exists("w")
            assert [header.id for header in await store.list()] == ["w"]
            again = await rt.resume_agent("w", AgentOptions(model="scripted"))
            assert (await again.ask("two")).reason.kind == "completed"
            await again.dispose()
            assert (await store.load("w")).last_turn == 2
    assert errors == []
    assert {"attach_new", "flush", "detach", "exists", "list", "load"} <= set(store.calls)


class _HangingFlushMixin:
    """A flush that never returns, as a store stuck on a lost connection."""

    async def flush(self, session: Session) -> None:
        await trio.sleep_forever()


class _HangingThroughAMixin(_HangingFlushMixin, DelegatingStore):
    """Its flush comes from the mixin, ahead of DelegatingStore's."""


class _Quiet(DelegatingStore):
    """Says its flush waits no longer than the wrapped store's: it does not override it."""

    durable = False


class _HangingUnderQuiet(_Quiet):
    """Overrides the flush its parent left alone, below that parent's ``durable = False``."""

    async def flush(self, session: Session) -> None:
        await trio.sleep_forever()


class _QuietHanging(_HangingUnderQuiet):
    """Says ``durable = False`` again, below the flush it inherits."""

    durable = False


@pytest.mark.parametrize("kind", [_HangingThroughAMixin, _HangingUnderQuiet])
async def test_a_flush_overridden_anywhere_below_delegating_store_is_bounded(
    autojump_clock: trio.testing.MockClock, kind: type[DelegatingStore]
) -> None:
    """R7.49, R12.9: a flush defined by a mixin, or by a subclass below one that set ``durable =
    False`` for the flush it kept, makes the store durable, so a hanging flush fails at
    ``flush_timeout`` and ``dispose`` and the runtime's exit end, where either was awaited
    unbounded as the wrapped memory store's and held them for good."""
    errors: list[BaseException] = []
    store = kind(MemoryStore())
    assert store.durable
    with trio.fail_after(600):
        async with retinue.open_runtime(
            models=ScriptedModel([Reply("a")]), store=store, flush_timeout=5
        ) as rt:
            rt.hooks.on("agent/error", lambda *args: errors.append(args[-1]))
            agent = await rt.create_agent("w", AgentOptions(model="scripted"))
            assert (await agent.ask("one")).reason.kind == "completed"
            await agent.dispose()
    assert errors
    assert all(isinstance(error, TimeoutError) for error in errors)


def test_durable_said_below_the_overridden_flush_stands() -> None:
    """R7.49: ``durable`` set on a class below the one defining ``flush`` is what the store says."""
    assert not _QuietHanging(MemoryStore()).durable
    assert not _Quiet(MemoryStore()).durable
