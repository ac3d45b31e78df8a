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
from retinue.tools import ToolOutput, tool
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
    """R9.2, R9.3: every provider drops a tool call, a tool result or reasoning from a
    tool's result, so the model read an empty result while the log held the body's: the
    call is an error result naming the block, where the blocks were logged as content.
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
