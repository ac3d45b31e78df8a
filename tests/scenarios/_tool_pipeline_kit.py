"""Running calls through a registry of their own and reading their results, for the tool
pipeline tests.
"""

from __future__ import annotations

from typing import cast

import attrs

from retinue._content import content_text
from retinue._handle import AgentHandle
from retinue._lossless import JsonValue
from retinue.hooks import HookBus
from retinue.session import ToolErrorInfo
from retinue.tools import Tool, ToolExecution, ToolExecutionResult, ToolRegistry, tool
from tests.helpers import Next


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


def setup(*tools: Tool) -> tuple[HookBus, ToolRegistry]:
    hooks = HookBus()
    return hooks, ToolRegistry(hooks, [echo, *tools])


def call(
    name: str = "echo",
    arguments: JsonValue = None,
    *,
    call_id: str = "call-1",
    agent_id: str | None = None,
    agent: object = None,
) -> ToolExecution:
    args: JsonValue = {"text": "hi"} if arguments is None else arguments
    handle = cast("AgentHandle | None", agent)  # an opaque stand-in: the registry only passes it on
    return ToolExecution(call_id, name, args, agent=handle, agent_id=agent_id)


def text_of(result: ToolExecutionResult) -> str:
    return content_text(result.content)


def failed(message: str, code: str | None = None, name: str = "ToolError") -> dict[str, object]:
    """The observable shape of an error result."""
    return {
        "text": f"Error: {message}",
        "is_error": True,
        "error": None if code is None else ToolErrorInfo(name, code),
    }


def shape(result: ToolExecutionResult) -> dict[str, object]:
    return {"text": text_of(result), "is_error": result.is_error, "error": result.error}


@attrs.define
class Seams:
    """Records which seams saw a call."""

    pre: list[ToolExecution] = attrs.Factory(list)
    post: list[ToolExecutionResult] = attrs.Factory(list)
    results: list[tuple[ToolExecution, ToolExecutionResult]] = attrs.Factory(list)

    def attach(self, hooks: HookBus) -> Seams:
        async def pre(execution: ToolExecution, call_next: Next) -> object:
            self.pre.append(execution)
            return await call_next()

        async def post(
            execution: ToolExecution, result: ToolExecutionResult, call_next: Next
        ) -> object:
            self.post.append(result)
            return await call_next()

        hooks.on("tools/pre-execute", pre)
        hooks.on("tools/post-execute", post)
        hooks.on("tools/result", lambda e, r: self.results.append((e, r)))
        return self
