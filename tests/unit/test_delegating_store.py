"""``DelegatingStore``: a subclass passes a watched call on with ``super()``."""

from __future__ import annotations

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
