"""Running one tool call through a registry of its own, for the tool body tests."""

from __future__ import annotations

from typing import cast

from retinue._content import content_text
from retinue._handle import AgentHandle
from retinue._lossless import JsonValue
from retinue.hooks import HookBus
from retinue.session import ToolErrorInfo
from retinue.tools import Tool, ToolExecution, ToolExecutionResult, ToolRegistry


async def execute(
    target: Tool, arguments: JsonValue, *, agent: object = None
) -> ToolExecutionResult:
    registry = ToolRegistry(HookBus(), [target])
    handle = cast("AgentHandle | None", agent)  # a stand-in with only the verbs a test needs
    return await registry.execute(ToolExecution("c1", target.name, arguments, agent=handle))


def outcome(result: ToolExecutionResult) -> tuple[str, ToolErrorInfo | None]:
    return content_text(result.content), result.error
