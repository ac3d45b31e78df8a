"""ScriptedModel.tool_loop: calls after each prompt, an answer after their results (R9.18)."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue.testing import ScriptedModel
from tests.helpers import DEADLINE, city_lookup


async def test_tool_loop_calls_the_tools_for_a_prompt_after_a_cancelled_turns_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.18, docs/testing.md: the loop calls the tools after each prompt. A turn a cancel cut
    in its tools leaves aborted results last in the history, and the next prompt after them is
    still answered with calls, not taken for the results' answer; steering and context after
    results are still answered."""
    calls: list[str] = []
    lookup = city_lookup(calls, seconds=5)
    model = ScriptedModel.tool_loop(["lookup"], arguments={"lookup": '{"city": "Oslo"}'})
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model, tools=[lookup]) as rt:
            agent = await rt.create_agent("writer", AgentOptions(model="scripted"))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.ask, "first")
                await trio.sleep(1)
                agent.cancel("stop")
            first = len(calls)
            second = await agent.ask("second")
            after_cancel = len(calls) - first
            rt.hooks.on("tools/post-execute", _with_context, agent=agent)
            third = await agent.ask("third")
    assert (first, after_cancel) == (2, 2)
    assert (second.reason.kind, third.reason.kind) == ("completed", "completed")
    assert len(calls) == 6


async def _with_context(_execution: object, _result: object, proceed: Any) -> Any:
    decision = await proceed()
    return attrs.evolve(decision, additional_context=retinue.HookContext("noted"))
