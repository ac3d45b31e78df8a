"""A runtime opened in another runtime's tool closes as a top-level one does (SPEC R12.9,
R12.10): the final flushes that failed are tried once more as it closes."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue.stores._writebehind import BufferedStore
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, runtime
from tests.stores._kit import OutageBackend


async def test_a_runtime_closed_in_a_tool_tries_failed_final_flushes_once_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9, R12.10: a runtime a tool opened commits, as it closes, what a failed final flush left
    buffered once the store is back: its close, made from the tool's agent, does not skip that try
    and leave the events buffered in the store."""
    backend = OutageBackend()
    store = BufferedStore(backend, name="outage")  # type: ignore[arg-type]
    buffered: dict[str, int] = {}

    @retinue.tool
    async def run_inner() -> str:
        """Run an agent in a runtime of its own."""
        async with retinue.open_runtime(models=ScriptedModel([Reply("one")]), store=store) as rt:
            agent = await rt.create_agent("w", OPTIONS)
            await agent.ask("hello")
            agent.inject("note")
            backend.down = True
            await agent.dispose()
            buffered["after the failed flush"] = store.statistics().buffered_events
            backend.down = False
        buffered["after the close"] = store.statistics().buffered_events
        return "ran"

    outer_model = ScriptedModel([CallTools([ToolCallSpec("run_inner")]), Reply("done")])
    async with store, runtime(outer_model, tools=[run_inner]) as outer:
        agent = await outer.create_agent("outer", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
    assert buffered["after the failed flush"] > 0
    assert buffered["after the close"] == 0
