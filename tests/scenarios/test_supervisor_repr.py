"""How a runtime and its registry show themselves: counts, whatever the number of agents."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS

DEADLINE = 600.0


async def test_a_runtime_and_its_registry_are_shown_by_their_counts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The runtime's repr and its registry's count the agents rather than show each: showing each,
    with 200 agents the runtime's would take some 110,000 characters (every agent, listener watcher
    and cleanup), growing with each agent, and the registry's 26,000."""
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])) as rt:
            for _ in range(200):
                await rt.create_agent("a", OPTIONS)
            assert repr(rt.agents) == "<AgentRegistry live=200>"
            shown = repr(rt)
            assert shown.startswith("<Runtime agents=200 creating=0 tearing_down=0 store=<")
            assert len(shown) < 200, shown
            await rt.aclose()
            assert repr(rt).startswith("<Runtime closing agents=0 ")
