"""A runtime's close cut short by a cancel still disposes every live agent (SPEC R12.10)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


def model() -> ScriptedModel:
    return ScriptedModel([Reply("ok")], repeat_last=True)


async def test_a_close_cancelled_at_once_still_disposes_every_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: a cancelled ``aclose`` still closes, as trio's do: every live agent is
    disposed and torn down, where they went on serving prompts in a runtime that
    refused new ones."""
    async with runtime(model()) as rt:
        agents = [await rt.create_agent("a", OPTIONS) for _ in range(3)]
        with trio.move_on_after(0):
            await rt.aclose()
        assert [agent.status for agent in agents] == ["disposed"] * 3
        for agent in agents:
            await agent.wait_idle()  # returns once torn down
        assert rt.agents.list() == []
        assert rt.closing


async def test_a_close_from_a_setup_disposes_every_live_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: ``aclose`` called from a creation's setup aborts that creation, which
    cancels the call, and still disposes the agents already live."""
    async with runtime(model()) as rt:
        live = await rt.create_agent("live", OPTIONS)

        async def setup(_agent: retinue.Agent) -> None:
            await rt.aclose()

        with pytest.raises(RuntimeError, match="agent loop is not active"):
            await rt.create_agent("closer", OPTIONS, setup=setup)
        assert live.status == "disposed"
        await live.wait_idle()
        assert rt.agents.get(live.id) is None
