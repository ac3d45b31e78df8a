"""A body's return holding a block no provider shows in a tool's result is an error (R9.2, R9.3)."""

from __future__ import annotations

import pytest
import trio

from retinue._content import (
    ContentBlock,
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue.hooks import Accept, Block
from retinue.tools import ToolExecution, ToolExecutionResult, ToolOutput, tool
from tests.helpers import Next
from tests.scenarios._tool_pipeline_kit import call, setup, text_of


@pytest.mark.parametrize(
    ("returned", "kind"),
    [
        ([Text("the answer"), ToolCall("c9", "echo", "{}")], "content[1] is a tool-call"),
        (ToolResultBlock("c9", (Text("nested"),)), "content[0] is a tool-result"),
        (ToolOutput([Reasoning("I think")], meta={"n": 1}), "content[0] is a reasoning"),
        ([Text("a"), RedactedReasoning("x")], "content[1] is a redacted-reasoning"),
    ],
    ids=["tool-call", "tool-result", "reasoning-in-output", "redacted-reasoning"],
)
async def test_a_return_holding_the_models_own_blocks_is_an_error_result(
    returned: object, kind: str, autojump_clock: trio.abc.Clock
) -> None:
    """R9.2, R9.3: every provider drops a tool call, a tool result or reasoning from a tool's
    result, so logged as content, the model would read an empty result while the log held the
    body's: the call is an error result naming the block.
    """

    @tool
    async def answer() -> object:
        """Answer with blocks."""
        return returned

    _, registry = setup(answer)
    with trio.fail_after(5):
        result = await registry.execute(call("answer", {}))
    assert result.is_error
    assert text_of(result).startswith(f"Error: the return value's {kind} block, which a tool")


async def test_text_and_opaque_blocks_are_still_a_result(autojump_clock: trio.abc.Clock) -> None:
    """R9.3: text and blocks retinue does not model (an image) are what a result holds."""
    image = OpaqueBlock("image", {"source": {"type": "url", "url": "https://example.com/a.png"}})
    blocks: list[ContentBlock] = [Text("see"), image]

    @tool
    async def show() -> object:
        """Show a picture."""
        return blocks

    _, registry = setup(show)
    with trio.fail_after(5):
        result = await registry.execute(call("show", {}))
    assert not result.is_error
    assert result.content == tuple(blocks)


@pytest.mark.parametrize(
    ("listener", "owner"),
    [
        ("accept", "tools/post-execute's Accept"),
        ("block", "tools/post-execute's Block feedback"),
        (
            "execute",
            "(tests.scenarios.test_tool_result_blocks.test_a_listener_giving_a_result_the_models_own_blocks_makes_an_invalid_hook_result.<locals>.execute) returned an unusable result: the result",
        ),
    ],
)
async def test_a_listener_giving_a_result_the_models_own_blocks_makes_an_invalid_hook_result(
    listener: str, owner: str, autojump_clock: trio.abc.Clock
) -> None:
    """R6.9, R9.3: content a listener puts in a result's place (a ``tools/post-execute``
    ``Accept``'s or ``Block``'s feedback, a ``tools/execute`` wrapper's result) is held to what a
    result may hold, as a body's return is: a tool call there is an ``INVALID_HOOK_RESULT`` error
    naming where it came from, not logged as the result while the model reads an empty one."""
    blocks = (Text("done"), ToolCall("c9", "echo", "{}"))

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, call_next: Next
    ) -> object:
        if listener == "accept":
            return Accept(content=blocks)
        return Block(reason="no", feedback=blocks)

    async def execute(execution: ToolExecution, call_next: Next) -> object:
        return ToolExecutionResult(execution.call_id, blocks)

    @tool
    async def done() -> str:
        """Report done."""
        return "done"

    hooks, registry = setup(done)
    if listener == "execute":
        hooks.on("tools/execute", execute)
    else:
        hooks.on("tools/post-execute", post)
    with trio.fail_after(5):
        result = await registry.execute(call("done", {}))
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "INVALID_HOOK_RESULT"
    assert f"{owner}'s content[1] is a tool-call block" in text_of(result)
