"""The end-of-turn flush when the runtime is cancelled from outside (a deadline around
``open_runtime``, Ctrl-C): it still runs, as after a dispose, before the teardown goes on
(SPEC R2.36, R7.42, R4.23, R7.49, R12.9; DESIGN 4)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue.session import Event, Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import DEADLINE, OPTIONS, nap, raises_ctrl_c, turn_ends

REAL_DEADLINE = 60.0


class _OrderStore(DelegatingStore):
    """A memory store recording, in *order*, each flush the loop asks of it and each detach."""

    def __init__(self, order: list[str]) -> None:
        super().__init__(MemoryStore())
        self.order = order

    async def flush(self, session: Session) -> None:
        self.order.append(f"flush {len(session.events)}")
        await self.store.flush(session)

    async def detach(self, session: Session) -> None:
        self.order.append("detach")
        await self.store.detach(session)


class _HangingStore(DelegatingStore):
    """A memory store whose flush never returns; its detach commits as usual."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())

    async def flush(self, session: Session) -> None:
        await trio.sleep_forever()


def _record(rt: retinue.Runtime, agent: retinue.Agent, order: list[str]) -> None:
    """Record in *order* what *agent*'s ``session/flush`` listener saw, and its ``agent/disposed``.

    The listener takes a virtual second: the cancel around the runtime must not cut it short.
    """

    async def heard(_agent: retinue.Agent, session: Session) -> None:
        await trio.sleep(1)
        order.append(f"heard {session.events[-1].type} {len(session.events)}")

    rt.hooks.on("session/flush", heard, agent=agent)
    rt.hooks.on("agent/disposed", lambda _agent: order.append("disposed"), agent=agent)


def _final_flush(events: Sequence[Event]) -> list[str]:
    """What :func:`_record` and :class:`_OrderStore` record of a final flush and teardown."""
    logged = len(events)
    return [f"flush {logged}", f"heard turn/end {logged}", "disposed", "detach"]


def _waiting_model() -> ScriptedModel:
    """A model whose ``tools`` step naps in a tool for 1000 s and whose ``hang`` step hangs."""
    return ScriptedModel(
        {"tools": [CallTools([ToolCallSpec("nap", '{"seconds": 1000}')])], "hang": [Hang("hm")]}
    )


async def _ask(agent: retinue.Agent, results: list[retinue.TurnResult]) -> None:
    results.append(await agent.ask("go"))


def _check_disposed_turn(
    agent: retinue.Agent, order: list[str], results: list[retinue.TurnResult]
) -> None:
    """*agent*'s one turn ended disposed, flushed and heard before its disposal and detach."""
    events = agent.session.events
    assert order == _final_flush(events)
    assert [(result.turn, result.reason.kind) for result in results] == [(1, "disposed")]
    assert turn_ends(events) == ["disposed"]
    check_session_invariants(events)


@pytest.mark.parametrize("where", ["hang", "tools"])
async def test_a_turn_ended_by_cancelling_the_scope_around_the_runtime_is_flushed_first(
    autojump_clock: trio.testing.MockClock, where: str
) -> None:
    """R2.36, R7.42, R4.23, R12.9: a turn the runtime's cancellation ends (waiting on the model, or
    in a tool call) is flushed once, ``session/flush`` listeners included, over the log its
    ``turn/end`` (disposed) closes, before ``agent/disposed`` and the store's detach; the ``ask``
    behind it is answered with that turn disposed."""
    model = _waiting_model()
    order: list[str] = []
    results: list[retinue.TurnResult] = []

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            with trio.move_on_after(10) as outer:
                store = _OrderStore(order)
                async with retinue.open_runtime(models=model, tools=[nap], store=store) as rt:
                    agent = await rt.create_agent(where, AgentOptions(model=where))
                    _record(rt, agent, order)
                    nursery.start_soon(_ask, agent, results)
                    await trio.sleep_forever()
    assert outer.cancelled_caught
    _check_disposed_turn(agent, order, results)


@pytest.mark.parametrize("where", ["hang", "tools"])
async def test_a_turn_ended_by_dispose_is_flushed_and_heard_before_the_agent_is_disposed(
    autojump_clock: trio.testing.MockClock, where: str
) -> None:
    """R12.9: ``agent.dispose()`` in the middle of a turn (waiting on the model, or in a tool
    call) waits for quiescence, the final flush and its ``session/flush`` listeners included,
    before ``agent/disposed`` and the store's detach, as a cancel around the runtime does."""
    model = _waiting_model()
    order: list[str] = []
    results: list[retinue.TurnResult] = []

    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model, tools=[nap], store=_OrderStore(order)) as rt:
            agent = await rt.create_agent(where, AgentOptions(model=where))
            _record(rt, agent, order)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_ask, agent, results)
                await trio.sleep(10)
                await agent.dispose()
            # Checked as dispose returns: the runtime's close would wait for a teardown left running.
            _check_disposed_turn(agent, order, results)


def _blocking_tool(started: trio.Event) -> retinue.Tool:
    @retinue.tool
    async def block() -> str:
        """Block until cancelled."""
        started.set()
        await trio.sleep_forever()

    return block


def _shape(events: Sequence[Event]) -> list[tuple[int, str]]:
    return [(event.seq, event.type) for event in events]


async def test_a_turn_ended_by_cancelling_the_runtime_resumes_from_sqlite_as_flushed(
    tmp_path: Path,
) -> None:
    """R2.36, R7.42, R4.23: over an SQLite file (on the real clock: the store works in
    threads), the cancelled turn's flush listeners see the whole log once, and a resume
    loads that same log."""
    path = tmp_path / "sessions.db"
    started = trio.Event()
    model = ScriptedModel([CallTools([ToolCallSpec("block", "{}")])])
    heard: list[list[tuple[int, str]]] = []
    with trio.fail_after(REAL_DEADLINE):
        with trio.CancelScope() as outer:
            store = retinue.SQLiteStore(path)
            tools = [_blocking_tool(started)]
            async with retinue.open_runtime(models=model, tools=tools, store=store) as rt:
                agent = await rt.create_agent("a", OPTIONS, session_id="s")
                rt.hooks.on(
                    "session/flush",
                    lambda _agent, session: heard.append(_shape(session.events)),
                    agent=agent,
                )
                agent.send("go")
                await started.wait()
                outer.cancel()
                await trio.sleep_forever()
        async with retinue.open_runtime(models=model, store=retinue.SQLiteStore(path)) as rt:
            resumed = await rt.resume_agent("s")
            stored = _shape(resumed.session.events)
            await resumed.dispose()
    assert heard == [_shape(agent.session.events)]
    assert stored == heard[0]
    assert turn_ends(agent.session.events) == ["disposed"]
    check_session_invariants(agent.session.events)


async def test_an_idle_inject_landing_with_the_runtime_s_cancellation_is_flushed_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.21, R4.23, R12.9: an inject made as the cancel around the runtime lands still has
    its flush run, ``session/flush`` listeners included, before ``agent/disposed`` and the
    store's detach, as a dispose right after it would."""
    order: list[str] = []
    box: dict[str, retinue.Agent] = {}
    ready = trio.Event()
    service_scope = trio.CancelScope()

    async def service() -> None:
        with service_scope:
            store = _OrderStore(order)
            async with retinue.open_runtime(models=ScriptedModel([Reply("ok")]), store=store) as rt:
                agent = box["a"] = await rt.create_agent("a", OPTIONS)
                _record(rt, agent, order)
                await agent.ask("hi")
                ready.set()
                await trio.sleep_forever()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service)
            await ready.wait()
            order.clear()
            service_scope.cancel()
            box["a"].inject("noted as the service stops")
    events = box["a"].session.events
    assert order == _final_flush(events)
    assert turn_ends(events) == ["completed", "completed"]
    check_session_invariants(events)


async def _raise(_agent: retinue.Agent, _session: Session) -> None:
    await trio.lowlevel.checkpoint()
    raise RuntimeError("listener down")


async def _hang(_agent: retinue.Agent, _session: Session) -> None:
    await trio.sleep_forever()


@pytest.mark.parametrize("failure", ["listener-raises", "listener-hangs", "store-hangs"])
async def test_a_failed_flush_under_the_runtime_s_cancellation_is_reported_and_bounded(
    autojump_clock: trio.testing.MockClock, failure: str
) -> None:
    """R7.49, R2.36, DESIGN 4: the flush a cancel around the runtime runs reports its
    failure on ``agent/error`` and never takes the cancel's place; ``flush_timeout``
    bounds it, so the cancelled block still ends; the detach commits what the store's
    flush did not."""
    store = _HangingStore() if failure == "store-hangs" else _OrderStore([])
    reported: list[tuple[int, BaseException]] = []
    started = trio.current_time()
    with trio.fail_after(DEADLINE), trio.move_on_after(10) as outer:
        model = ScriptedModel([Hang("thinking")])
        async with retinue.open_runtime(models=model, store=store, flush_timeout=5) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.hooks.on("agent/error", lambda _a, turn, _s, error: reported.append((turn, error)))
            if failure != "store-hangs":
                rt.hooks.on("session/flush", _raise if failure == "listener-raises" else _hang)
            agent.send("go")
            await trio.sleep_forever()
    assert outer.cancelled_caught
    [(turn, error)] = reported
    assert turn == 1
    if failure == "listener-raises":
        assert (type(error), str(error)) == (RuntimeError, "listener down")
        assert trio.current_time() - started == pytest.approx(10)
    else:
        late = "the store's flush" if failure == "store-hangs" else "the session/flush listeners"
        assert isinstance(error, TimeoutError)
        assert str(error).endswith(f"timed out: {late} ran past 5s")
        assert trio.current_time() - started == pytest.approx(15)
    events = agent.session.events
    assert store.store.statistics().committed_events == len(events)
    assert turn_ends(events) == ["disposed"]
    check_session_invariants(events)


async def _interrupt(*_args: object) -> NoReturn:
    await trio.lowlevel.checkpoint()
    raise KeyboardInterrupt


async def test_ctrl_c_ending_a_turn_runs_its_flush_before_it_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.42, R2.36, R12.9: Ctrl-C landing in the driver (in a pre-step listener, here) ends
    the turn disposed as a cancel from outside does, and its flush runs too, listeners
    included, bounded like any flush; then Ctrl-C goes on out of the runtime."""
    order: list[str] = []
    box: dict[str, retinue.Agent] = {}
    with trio.fail_after(DEADLINE), raises_ctrl_c():
        model = ScriptedModel([Reply("never")])
        async with retinue.open_runtime(models=model, store=_OrderStore(order)) as rt:
            agent = box["a"] = await rt.create_agent("a", OPTIONS)
            _record(rt, agent, order)
            rt.hooks.on("agent/pre-step", _interrupt, agent=agent)
            await agent.ask("go")
    events = box["a"].session.events
    assert order == _final_flush(events)
    assert turn_ends(events) == ["disposed"]
    check_session_invariants(events)
