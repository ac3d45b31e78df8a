"""Ctrl-C in the runtime's own task (while its configured agents start, and while its agents
are disposed on the way out) and in a teardown's scoped cleanup (R12.9, R12.10, R13.3)."""

from __future__ import annotations

from typing import NoReturn

import pytest
import trio
import trio.testing

import retinue
from retinue.config import AgentEntry, LoopConfig
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS

DEADLINE = 600.0


def _interrupt(*_args: object) -> NoReturn:
    raise KeyboardInterrupt


class _InterruptedLookup(DelegatingStore):
    """Ctrl-C lands while the runtime asks whether a session is stored."""

    async def exists(self, session_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt


async def test_ctrl_c_while_the_runtime_disposes_its_agents_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: Ctrl-C landing in the runtime's own task as it disposes its agents on the way out
    (here, in an ``agent/status`` listener that task runs) comes out of ``open_runtime`` as the
    KeyboardInterrupt it is, as one landing in the body does, not wrapped in the group of the
    runtime's nursery, which an ``except KeyboardInterrupt`` does not catch. The agent is still torn
    down."""
    agents: list[retinue.Agent] = []
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])) as rt:
                agent = await rt.create_agent("a", OPTIONS)
                agents.append(agent)
                await agent.ask("hello")
                rt.hooks.on(
                    "agent/status",
                    lambda _agent, status: _interrupt() if status == "disposed" else None,
                )
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"
    assert agents[0].status == "disposed"


async def test_ctrl_c_while_configured_agents_start_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.3, R12.10: Ctrl-C landing while ``open_runtime`` starts its configured agents
    (here, as it asks the store whether a session is stored) comes out as the
    KeyboardInterrupt it is, not wrapped in the group of the runtime's nursery."""
    config = LoopConfig(agents=(AgentEntry("keeper", session_id="kept"),))
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            async with retinue.open_runtime(
                models=ScriptedModel([Reply("hi")]),
                store=_InterruptedLookup(MemoryStore()),
                config=config,
            ):
                pytest.fail("the runtime opened past its interrupted start")
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"


class _Detaches(DelegatingStore):
    """A memory store that records the sessions it detaches."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.detached: list[str] = []

    async def detach(self, session: Session) -> None:
        await self.store.detach(session)
        self.detached.append(session.id)


async def test_ctrl_c_in_a_scoped_cleanup_still_unwinds_the_rest_of_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: Ctrl-C raised by one of an agent's scoped cleanups as its teardown runs them ends the
    runtime, and the teardown's other stages still run: the cleanups registered before it, the end
    of every subscription and the detach, so no cleanup is skipped, no subscriber waits for good and
    the session does not stay attached."""
    store = _Detaches()
    cleaned: list[str] = []
    ended: list[str] = []
    caught: BaseException | None = None
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as outer:
            try:
                async with retinue.open_runtime(
                    models=ScriptedModel([Reply("hi")]), store=store
                ) as rt:
                    agent = await rt.create_agent("a", OPTIONS, session_id="s")
                    await agent.ask("hello")
                    rt.scoped(agent, lambda: cleaned.append("cleanup"))
                    rt.scoped(agent, _interrupt)  # run first: newest first
                    feed = agent.subscribe()

                    async def read() -> None:
                        async for _event in feed:
                            pass
                        ended.append("feed")

                    outer.start_soon(read)
                    await agent.dispose()
            except BaseException as exc:  # a group would end the test run: judged below
                caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"
    assert (cleaned, ended, store.detached) == (["cleanup"], ["feed"], ["s"])


@retinue.tool(name="interrupted")
async def _interrupted_tool() -> str:
    """Ctrl-C lands while this tool runs."""
    await trio.sleep(1)
    raise KeyboardInterrupt


async def test_ctrl_c_in_agents_tools_comes_out_of_the_runtime_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: Ctrl-C that trio delivers in an agent's task (here, in the tools of two agents
    mid-turn) comes out of ``open_runtime`` as a KeyboardInterrupt, as one landing in the body does,
    and every agent is torn down. It does not come as a group of the runtime's nursery holding each
    agent's group, which an ``except KeyboardInterrupt`` does not catch."""
    model = ScriptedModel([CallTools([ToolCallSpec("interrupted", "{}")])], repeat_last=True)
    agents: list[retinue.Agent] = []
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            async with retinue.open_runtime(models=model, tools=[_interrupted_tool]) as rt:
                agents += [await rt.create_agent("a", OPTIONS) for _ in range(2)]
                for agent in agents:
                    agent.send("work")
                await agents[0].wait_idle()
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"
    assert [agent.status for agent in agents] == ["disposed", "disposed"]


async def test_a_system_exit_the_body_raises_mid_turn_comes_out_of_the_runtime_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9, R12.10: a ``SystemExit`` the body raises (``sys.exit`` in a script) while an agent's
    turn runs comes out of ``open_runtime`` as itself, its status kept, as Ctrl-C does, not wrapped
    in the runtime's group, with which Python exits with a traceback and status 1. The turn it cut
    short is closed in the log. (The model's own ``SystemExit`` is its failure: it ends only its
    turn.)"""
    agents: list[retinue.Agent] = []
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            model = ScriptedModel([Reply("slow", delay=100)])
            async with retinue.open_runtime(models=model) as rt:
                agent = await rt.create_agent("a", OPTIONS)
                agents.append(agent)
                agent.send("hello")
                await trio.sleep(1)
                raise SystemExit(3)
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, SystemExit), f"got {caught!r}"
    assert caught.code == 3
    check_session_invariants(agents[0].session.events)
    assert agents[0].session.events[-1].type == "turn/end"
