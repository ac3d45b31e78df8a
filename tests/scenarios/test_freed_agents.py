"""A disposed agent is freed by reference counting once nothing refers to it.

Each test runs with the cyclic collector off: what a cycle holds is not freed
there, and shows as a handle, session or store still alive.
"""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio
import trio.testing

import retinue
from retinue import MessageSource
from retinue.session import Session, TurnEnd, TurnEndReason, TurnStart, TurnTrigger
from retinue.stores import MemoryStore
from retinue.testing import FinishWithError, Hang, Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


@contextmanager
def collector_off() -> Iterator[None]:
    """Turn the cyclic collector off inside the ``with``, after a full collection."""
    gc.collect()
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


async def _disposed_agent() -> tuple[weakref.ref[retinue.Agent], weakref.ref[Session]]:
    """Run and dispose an agent in a runtime that then closes; weak references to it."""
    async with runtime(ScriptedModel([Reply("ok", chunks=3)], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hello")
        await agent.dispose()
        # The handle works on as documented once disposed.
        assert agent.status == "disposed"
        await agent.wait_idle()
        assert [event.type for event in agent.session.events][-1] == "turn/end"
        handle, session = weakref.ref(agent), weakref.ref(agent.session)
    return handle, session


async def test_a_disposed_agent_and_its_session_go_with_the_last_reference_to_the_handle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Neither the agent's own driver task nor its core keeps the handle once it is torn down."""
    with collector_off():
        handle, session = await _disposed_agent()
        assert handle() is None
        assert session() is None


async def test_an_agent_whose_setup_failed_goes_with_the_last_reference_to_its_handle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An agent its creation never published lets go of its handle as it ends, as a torn down one does."""
    handles: list[weakref.ref[retinue.Agent]] = []

    def failing_setup(agent: retinue.Agent) -> None:
        handles.append(weakref.ref(agent))
        raise ValueError("no setup")

    with collector_off():
        async with runtime(ScriptedModel([Reply("ok")])) as rt:
            with pytest.raises(ValueError, match="no setup"):
                await rt.create_agent("a", OPTIONS, setup=failing_setup)
        assert [handle() for handle in handles] == [None]


async def test_a_closed_store_goes_with_the_last_reference_to_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A store's group committer does not keep the store, and with it every session it stored."""
    with collector_off():
        store = MemoryStore()
        async with runtime(ScriptedModel([Reply("ok")]), store=store) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            await agent.ask("hello")
        kept = weakref.ref(store)
        del store, rt, agent
        assert kept() is None


async def test_the_error_a_turn_ended_with_goes_with_the_last_reference_to_its_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The turn lets go of the error its result carries, traceback and all: the traceback
    holds the turn's frames, which hold the turn."""
    model = ScriptedModel([FinishWithError("model broke", "MODEL_BROKE")], repeat_last=True)
    with collector_off():
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            result = await agent.ask("hello")
            assert isinstance(result.error, retinue.ModelError)
            assert result.error.__traceback__ is not None
            kept = weakref.ref(result.error)
        del result, agent
        assert kept() is None


@retinue.tool(parallel_safe=True)
async def noted(text: str) -> str:
    """Note the text.

    Args:
        text: What to note.
    """
    await trio.lowlevel.checkpoint()
    return f"noted: {text}"


@retinue.tool
def broken(text: str) -> str:
    """Fail in its worker thread.

    Args:
        text: What it fails on.
    """
    raise ValueError(f"broken on {text}")


def _model_ending(ending: str) -> ScriptedModel:
    if ending in ("completed", "sync tool failed"):
        name = "noted" if ending == "completed" else "broken"
        arguments = {name: '{"text": "hi"}'}
        return ScriptedModel.tool_loop([name], calls_per_step=2, arguments=arguments)
    if ending == "error":
        return ScriptedModel([FinishWithError("model broke", "MODEL_BROKE")], repeat_last=True)
    return ScriptedModel([Hang("thinking")], repeat_last=True)


async def _ask_with_a_turn_open_in_the_log(agent: retinue.Agent) -> None:
    """Ask while another writer's turn is open: the turn fails before it opens."""
    foreign = MessageSource("plugin", "foreign")
    agent.session.append(TurnStart(1, TurnTrigger("message", foreign)))
    result = await agent.ask("hello")
    assert result.reason.code == "TURN_NOT_OPENED"
    agent.session.append(TurnEnd(1, TurnEndReason.completed()))


async def _agents_ending(ending: str) -> None:
    """Two agents whose turns end *ending*; one disposed, the other with its runtime."""
    async with runtime(_model_ending(ending), tools=[noted, broken]) as rt:
        agents = [await rt.create_agent(f"a{index}", OPTIONS) for index in range(2)]
        for agent in agents:
            if ending == "not opened":
                await _ask_with_a_turn_open_in_the_log(agent)
                continue
            if ending in ("completed", "sync tool failed", "error"):
                await agent.ask("hello")
                continue
            agent.send("hello")
            await trio.testing.wait_all_tasks_blocked()  # the model hangs mid-stream
            if ending == "cancelled":
                agent.cancel("enough")
                await agent.wait_idle()
        await agents[0].dispose()
        with pytest.raises(retinue.AgentDisposedError):
            await agents[0].ask("again")


@pytest.mark.parametrize(
    "ending", ["completed", "sync tool failed", "error", "not opened", "cancelled", "disposed"]
)
async def test_agents_torn_down_leave_nothing_to_the_cyclic_collector(
    monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """Once their runtime is closed, agents whose turns ended *ending* are freed by
    reference counting: the cyclic collector finds nothing left of them. (On trio's
    own clock: a virtual one would jump to the runtime's deadline while a sync tool's
    worker thread runs.)"""
    # pytest keeps every log record with its arguments, a turn's error among them, which
    # would keep alive what a cycle holds: the loop's warnings go to stderr instead.
    monkeypatch.setattr(logging.getLogger("retinue.loop"), "propagate", False)
    await _agents_ending(ending)  # the first run fills caches that live on
    with collector_off():
        await _agents_ending(ending)
        assert gc.collect() == 0
