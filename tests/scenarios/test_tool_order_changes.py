"""The configured tool order while tools come and go (SPEC R7.51, R8.4)."""

from __future__ import annotations

import trio
import trio.testing

from retinue.testing import Reply, ScriptedModel
from retinue.tools import Tool
from tests.helpers import OPTIONS, runtime


def _tool(name: str) -> Tool:
    async def body() -> str:
        await trio.lowlevel.checkpoint()
        return name

    return Tool(name, f"The {name} tool.", {"type": "object", "properties": {}}, body)


async def test_tool_order_naming_a_disposed_agents_tool_keeps_other_agents_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Tool order / R7.51: once the only agent a listed tool was scoped to is disposed, other
    agents' steps skip the name rather than end ``error`` with INVALID_CONFIG.
    """
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, tools=[_tool("common")], tool_order=["special", "*"]) as rt:
        owner = await rt.create_agent("owner", OPTIONS)
        other = await rt.create_agent("other", OPTIONS)
        rt.tools.add(_tool("special"), agent=owner)
        await owner.ask("hi")
        first = await other.ask("hi")
        await owner.dispose()
        second = await other.ask("hi")
    assert (first.reason.kind, second.reason.kind) == ("completed", "completed")
    assert [[t.name for t in request.tools] for request in model.requests] == [
        ["special", "common"],
        ["common"],
        ["common"],
    ]
