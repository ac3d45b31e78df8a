"""A runtime's close cut short by a cancel still disposes every live agent (SPEC R12.10)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue.session import ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, runtime


def model() -> ScriptedModel:
    return ScriptedModel([Reply("ok")], repeat_last=True)


async def test_a_close_cancelled_at_once_still_disposes_every_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: a cancelled ``aclose`` still closes, as trio's do: every live agent is disposed and
    torn down, none left serving prompts in a runtime that refuses new ones."""
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


async def test_a_close_from_an_agents_own_tool_returns_once_the_teardowns_have_begun(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: ``aclose`` from an agent's own tool returns (its own teardown waits for the call to
    end): the teardown begun before its checkpoint does not cancel the call."""
    outcomes: list[str] = []
    runtimes: list[retinue.Runtime] = []

    @retinue.tool(name="closer")
    async def closer() -> str:
        """Close the runtime."""
        await runtimes[0].aclose()
        outcomes.append("returned")
        return "closed"

    scripted = ScriptedModel(
        [CallTools([ToolCallSpec("closer", "{}", id="c1")]), Reply("done")], repeat_last=True
    )
    with trio.fail_after(60):
        async with retinue.open_runtime(models=scripted, tools=[closer]) as rt:
            runtimes.append(rt)
            agent = await rt.create_agent("a", OPTIONS)
            other = await rt.create_agent("b", OPTIONS)
            await agent.ask("close")
            assert outcomes == ["returned"]
            [result] = [e.data for e in agent.session.events if isinstance(e.data, ToolResultEvent)]
            assert not result.is_error
            await other.wait_idle()
            assert other.status == "disposed"


# Real seconds: a shielded wait that never ends is out of the virtual deadline's reach.
@pytest.mark.timeout(30)
async def test_a_shielded_close_from_a_setup_returns_without_waiting_for_its_own_creation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: a close shielded from the abort of the creation whose setup calls it waits for the
    other creations, not its own, which ends only once the setup returns: waiting for that creation,
    it would hold the close, and the runtime with it, for good."""
    async with runtime(model()) as rt:
        live = await rt.create_agent("live", OPTIONS)

        async def setup(_agent: retinue.Agent) -> None:
            with trio.CancelScope(shield=True):
                await rt.aclose()

        with trio.fail_after(60), pytest.raises(RuntimeError, match="agent loop is not active"):
            await rt.create_agent("closer", OPTIONS, setup=setup)
        await live.wait_idle()
        assert live.status == "disposed"
