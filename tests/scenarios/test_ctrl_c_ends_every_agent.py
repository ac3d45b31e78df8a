"""Ctrl-C landing in one agent's turn ends the runtime at once: no other agent goes on
working while that agent closes its turn, and each turn in flight ends disposed (R12.10).

Agent A's tool asks agent B, the README's way for agents to ask each other; Ctrl-C lands in
B's turn. Before, A heard B's answer (``disposed``) while B's task closed and flushed, asked
its model again and ran a tool with a side effect, its turn stored ``completed``.
"""

from __future__ import annotations

import threading
from typing import NoReturn

import pytest
import trio
import trio.testing

import retinue
from retinue.session import Event, Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    RaiseMidStream,
    Reply,
    ScriptedModel,
    Step,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.helpers import DEADLINE, last_end_reason

REAL_DEADLINE = 30.0
"""Real seconds the sync-tool case may take: it waits for nothing but a worker thread."""

charged: list[float] = []


@retinue.tool
async def explode() -> str:
    """Raise Ctrl-C in an async tool body."""
    raise KeyboardInterrupt


@retinue.tool
def explode_in_a_thread() -> str:
    """Raise Ctrl-C in a sync tool body, in its worker thread."""
    raise KeyboardInterrupt


@retinue.tool
async def charge_card() -> str:
    """A side effect no agent may run once Ctrl-C came."""
    charged.append(trio.current_time())
    return "charged"


def _interrupt(*_args: object) -> NoReturn:
    raise KeyboardInterrupt


def _interrupt_on_turn_end(event: Event) -> None:
    if event.type == "turn/end":
        raise KeyboardInterrupt


def _interrupt_when_running(_agent: object, status: str, *_rest: object) -> None:
    if status == "running":
        raise KeyboardInterrupt


B_STEPS: dict[str, list[Step]] = {
    "model": [RaiseMidStream(KeyboardInterrupt())],
    "tool": [CallTools([ToolCallSpec("explode", "{}")]), Reply("B done")],
    "sync tool": [CallTools([ToolCallSpec("explode_in_a_thread", "{}")]), Reply("B done")],
}
"""Where B's own steps raise Ctrl-C; the other cases rig B's seams (``_rig``)."""


class _InterruptingStore(DelegatingStore):
    """A store whose flush of B's session raises Ctrl-C once armed: its own, bare or in the
    group of a nursery it writes from (two replicas, say)."""

    durable = False  # committed in place, with no flush part around it
    armed = ""

    async def flush(self, session: Session) -> None:
        how, type(self).armed = type(self).armed, ""
        if how == "bare" and session.id == "b":
            raise KeyboardInterrupt
        if how == "grouped" and session.id == "b":
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_interrupt_soon)
        await super().flush(session)


async def _interrupt_soon() -> NoReturn:
    await trio.lowlevel.checkpoint()
    raise KeyboardInterrupt


def _rig(rt: retinue.Runtime, b: retinue.Agent, where: str) -> None:
    """Make Ctrl-C land in one of B's seams around its turn, as *where* names it."""
    if where.startswith("store, "):
        _InterruptingStore.armed = where.removeprefix("store, ")
    elif where == "turn/end observer":
        b.session.observe(_interrupt_on_turn_end)
    elif where == "session/flush listener":
        rt.hooks.on("session/flush", _interrupt, agent=b)
    elif where == "agent/status listener":
        rt.hooks.on("agent/status", _interrupt_when_running, agent=b)


async def _check_ctrl_c_in_b_stops_a(where: str, deadline: float) -> None:
    """Run A asking B from its tool, Ctrl-C landing in B *where*; check A stopped at once."""
    charged.clear()
    steps_of_a: list[Step] = [
        CallTools([ToolCallSpec("delegate", "{}")]),
        CallTools([ToolCallSpec("charge_card", "{}")]),
        Reply("A done"),
    ]
    model = ScriptedModel({"a": steps_of_a, "b": B_STEPS.get(where, [Reply("B done")])})
    sessions: list[Session] = []
    raised: BaseException | None = None
    async with _InterruptingStore(MemoryStore()) as store:
        try:
            with trio.fail_after(deadline):
                tools = [explode, explode_in_a_thread, charge_card]
                async with retinue.open_runtime(models=model, tools=tools, store=store) as rt:
                    b = await rt.create_agent("b", retinue.AgentOptions(model="b"), session_id="b")
                    _rig(rt, b, where)

                    @retinue.tool
                    async def delegate() -> str:
                        """Ask B."""
                        return (await b.ask("go")).reason.kind

                    rt.tools.add(delegate)
                    a = await rt.create_agent("a", retinue.AgentOptions(model="a"))
                    sessions.append(a.session)
                    await a.ask("start")
        except BaseException as exc:  # a group would end the test run: judged below
            raised = exc
        assert isinstance(raised, KeyboardInterrupt), f"got {raised!r}"
        assert charged == []
        # B asks its model, but for an agent/status listener's Ctrl-C, raised before it does.
        asked_by_b = 0 if where == "agent/status listener" else 1
        assert model.statistics().calls == 1 + asked_by_b, "A asked its model again"
        events: tuple[Event, ...] = tuple(sessions[0].events)
        assert last_end_reason(events).kind == "disposed"
        check_session_invariants(events)
        check_no_dangling_tool_calls(events)
        stored = await store.load(sessions[0].id)
        assert stored is not None
        assert last_end_reason(stored.events).kind == "disposed"


@pytest.mark.parametrize(
    "where",
    [
        "model",
        "tool",
        "turn/end observer",
        "session/flush listener",
        "agent/status listener",
        "store, bare",
        "store, grouped",
    ],
)
async def test_ctrl_c_in_one_agent_s_turn_stops_every_other_agent_at_once(
    autojump_clock: trio.testing.MockClock, where: str
) -> None:
    """R12.10: Ctrl-C in B's model stream or async tool, or from a seam around B's turn (an
    observer of its ``turn/end``, a ``session/flush`` listener, an ``agent/status`` listener)
    reaches the caller; A, waiting on B from its tool, asks its model nothing more and runs
    no tool, and its turn ends ``disposed``, live and stored, its log balanced."""
    await _check_ctrl_c_in_b_stops_a(where, DEADLINE)


async def test_ctrl_c_in_one_agent_s_sync_tool_stops_every_other_agent_at_once() -> None:
    """R12.10: the same for Ctrl-C raised in B's sync tool, in its worker thread (on real
    time: a virtual clock would jump past the deadline while the thread runs; nothing here
    waits)."""
    await _check_ctrl_c_in_b_stops_a("sync tool", REAL_DEADLINE)


class _SlowWritingStore(DelegatingStore):
    """A durable store whose write takes half a second in a worker thread, which no cancel
    stops (as a slow disk's fsync, or a database's round trip)."""

    async def flush(self, session: Session) -> None:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(threading.Event().wait, 0.5)
        await super().flush(session)


async def test_ctrl_c_from_a_flush_listener_ends_the_runtime_before_the_store_s_write_ends() -> (
    None
):
    """R7.49, R12.10: B's ``session/flush`` listener raises Ctrl-C while the store's write of
    that flush runs on in its thread; A, whose tool was waiting for that moment, runs no
    further tool, where it ran on until the write ended.
    (On real time: a virtual clock would jump past the deadline while the thread runs.)"""
    charged.clear()
    flushing = trio.Event()

    @retinue.tool
    async def wait_for_b() -> str:
        """Wait until B's flush has begun."""
        await flushing.wait()
        return "B is flushing"

    def interrupt_once(*_args: object) -> None:
        if not flushing.is_set():
            flushing.set()
            raise KeyboardInterrupt

    steps_of_a: list[Step] = [
        CallTools([ToolCallSpec("wait_for_b", "{}")]),
        CallTools([ToolCallSpec("charge_card", "{}")]),
        Reply("A done"),
    ]
    model = ScriptedModel({"a": steps_of_a, "b": [Reply("B done")]})
    raised: BaseException | None = None
    try:
        with trio.fail_after(REAL_DEADLINE):
            tools = [wait_for_b, charge_card]
            store = _SlowWritingStore(MemoryStore())
            async with retinue.open_runtime(models=model, tools=tools, store=store) as rt:
                a = await rt.create_agent("a", retinue.AgentOptions(model="a"))
                b = await rt.create_agent("b", retinue.AgentOptions(model="b"))
                rt.hooks.on("session/flush", interrupt_once, agent=b)
                a.send("start")
                await b.ask("go")
                await a.wait_idle()
    except BaseException as exc:  # a group would end the test run: judged below
        raised = exc
    assert isinstance(raised, KeyboardInterrupt), f"got {raised!r}"
    # A's tool, woken as the listener raised, may reach A's next request before the
    # listeners' nursery hands the Ctrl-C on; no tool runs after it.
    assert charged == []
