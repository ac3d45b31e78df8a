"""What a prompt may hold: no tool call and no tool result (R1.1, R2.10, R2.16, R5.2)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from retinue import Allow, Continue, HookContext, Text, ToolCall, ToolResultBlock
from retinue.providers import OpaqueBlock
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime

_CALL = ToolCall("call-1", "lookup", "{}")
_RESULT = ToolResultBlock("call-1", (Text("sunny"),))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ([Text("see"), _CALL], r"^content\[1\] is a tool-call block, which a prompt cannot hold"),
        (_RESULT, r"^content\[0\] is a tool-result block, which a prompt cannot hold"),
    ],
    ids=["tool-call", "tool-result"],
)
async def test_every_verb_refuses_a_tool_call_or_result_and_sends_nothing(
    autojump_clock: trio.testing.MockClock, content: object, expected: str
) -> None:
    """R5.2: a prompt, steering or context is the user's message to the model, which no provider
    takes with a tool call in it, or a tool result answering no call of the step before it. ask,
    send, steer and inject refuse one with a ValueError, and nothing is logged: taken, it would ride
    in every later request of the agent (Anthropic refuses such a request; OpenAI's adapter would
    send it without the block)."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        for verb in (agent.send, agent.steer, agent.inject):
            with pytest.raises(ValueError, match=expected):
                verb(content)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=expected):
            await agent.ask(content)  # type: ignore[arg-type]
        await agent.wait_idle()
        assert list(agent.session.events) == []
        assert model.statistics().calls == 0
        assert (await agent.ask("hello")).text == "ok"


@pytest.mark.parametrize("block", [_CALL, _RESULT], ids=["tool-call", "tool-result"])
def test_a_listener_cannot_put_a_tool_call_or_result_into_a_prompt(block: object) -> None:
    """R6.6, R7.11, R7.27: a prompt-submit rewrite, a context and a continuation's
    reason become the user's messages too; each refuses such a block where the
    listener builds it."""
    with pytest.raises(ValueError, match="which a prompt cannot hold"):
        Allow(content=[block])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="which a prompt cannot hold"):
        HookContext([block])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="which a prompt cannot hold"):
        Continue(HookContext(block))  # type: ignore[arg-type]


def test_a_prompt_keeps_text_and_blocks_it_may_hold() -> None:
    """R1.1: text and blocks of kinds retinue does not model still pass through."""
    opaque = OpaqueBlock("image", {"url": "https://example.com/a.png"})
    context = HookContext([Text("look"), opaque])
    assert context.content == (Text("look"), opaque)
