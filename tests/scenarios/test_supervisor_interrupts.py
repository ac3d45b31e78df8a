"""Ctrl-C in the runtime's own task: while its configured agents start, and while its agents
are disposed on the way out (R12.10, R13.3)."""

from __future__ import annotations

from typing import NoReturn

import pytest
import trio
import trio.testing

import retinue
from retinue.config import AgentEntry, LoopConfig
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel
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
    """R12.10: Ctrl-C landing in the runtime's own task as it disposes its agents on the
    way out (here, in an ``agent/status`` listener that task runs) comes out of
    ``open_runtime`` as the KeyboardInterrupt it is, as one landing in the body does:
    it came wrapped in the group of the runtime's nursery, which an ``except
    KeyboardInterrupt`` does not catch. The agent is still torn down."""
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
