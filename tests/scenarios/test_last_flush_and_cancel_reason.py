"""The last flush before disposal (R2.21, R12.9) and the reason a cancelled turn keeps (R7.22)."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore, Hang, Reply, ScriptedModel
from tests.helpers import OPTIONS, last_end_reason, runtime


class OrderStore(DelegatingStore):
    """Records, in order, each flush of a session the loop asks for and each detach."""

    def __init__(self, store: MemoryStore, order: list[str]) -> None:
        super().__init__(store)
        self.order = order

    async def flush(self, session: Session) -> None:
        self.order.append(f"flush {len(session.events)}")
        await self.store.flush(session)

    async def detach(self, session: Session) -> None:
        self.order.append("detach")
        await self.store.detach(session)


async def test_r2_21_idle_inject_then_dispose_flushes_before_the_agent_is_unregistered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.21, R12.9: an idle inject's flush is the final flush: it runs before ``agent/disposed``.

    Disposing right after the inject must not drop that flush: quiescence, the
    final flush included, precedes registry removal and session detach.
    """
    order: list[str] = []
    store = OrderStore(MemoryStore(), order)
    async with runtime(ScriptedModel([Reply("ok")]), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/disposed", lambda _agent: order.append("disposed"), agent=agent)
        agent.inject("remember this")
        await agent.dispose()
        logged = len(agent.session.events)
        assert logged == 3
        assert order[:1] == [f"flush {logged}"]
        assert order.index(f"flush {logged}") < order.index("disposed")


async def test_r2_21_inject_during_a_background_flush_is_flushed_before_disposal_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.21, R4.23, R12.9: an inject made while the previous idle flush runs is flushed too.

    The ``session/flush`` listeners are peers of the checkpoint: the last of
    them sees every event, even when the agent is disposed right after.
    """
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        seen: list[int] = []

        async def on_flush(_agent: object, session: Session) -> None:
            seen.append(len(session.events))
            await trio.sleep(5)

        rt.hooks.on("session/flush", on_flush, agent=agent)
        agent.inject("one")
        await trio.sleep(1)  # the first injection's flush is in flight
        agent.inject("two")
        await agent.dispose()
        assert seen == [3, 6]


async def test_r7_22_a_second_cancel_does_not_rewrite_the_reason_of_the_aborted_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.28, R7.22: a mid-step abort ends the turn with the reason of the cancel that aborted it.

    The step is aborted once; a later cancel finds it aborted already and, like
    the prompts the first cancel discarded, the turn keeps the first reason.
    """
    model = ScriptedModel([Hang("partial"), Reply("later")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(5)
        results: list[retinue.TurnResult] = []

        async def ask() -> None:
            results.append(await agent.ask("queued meanwhile"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            agent.cancel("user pressed stop")
            agent.cancel("cleanup")  # before the driver has unwound the aborted step
        await agent.wait_idle()
        assert results[0].reason.reason == "user pressed stop"
        assert last_end_reason(agent.session.events).reason == "user pressed stop"
