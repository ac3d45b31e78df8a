"""What a prompt may hold: something to say, but no tool call and no tool result (R1.1, R2.10,
R2.16, R5.2)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from retinue import Allow, Continue, HookContext, Text, ToolCall, ToolResultBlock, tool
from retinue.providers import OpaqueBlock
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import ToolExecutionResult
from tests.helpers import OPTIONS, nap, runtime

_CALL = ToolCall("call-1", "lookup", "{}")


@tool
async def lookup() -> str:
    """Look something up."""
    await trio.lowlevel.checkpoint()
    return "sunny"


_RESULT = ToolResultBlock("call-1", (Text("sunny"),))

_SAYS_NOTHING = r"must say something to the model"
_NOTHING_CASES = {
    "no block": [],
    "empty tuple": (),
    "empty text": "",
    "blank text": " \n",
    "empty block": Text(""),
    "blank blocks": [Text(" "), Text("\u3000")],
}
_NOTHING = pytest.mark.parametrize("content", _NOTHING_CASES.values(), ids=_NOTHING_CASES.keys())


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ([Text("see"), _CALL], r"^content\[1\] is a tool-call block, which a prompt cannot hold"),
        (_RESULT, r"^content\[0\] is a tool-result block, which a prompt cannot hold"),
        *((content, _SAYS_NOTHING) for content in _NOTHING_CASES.values()),
    ],
    ids=["tool-call", "tool-result", *_NOTHING_CASES],
)
async def test_every_verb_refuses_content_a_prompt_cannot_hold_and_sends_nothing(
    autojump_clock: trio.testing.MockClock, content: object, expected: str
) -> None:
    """R5.2, R2.10, R2.16: a prompt, steering or context is the user's message to the model,
    which no provider takes with a tool call in it, or a tool result answering no call of the
    step before it. ask, send, steer and inject refuse one with a ValueError, and nothing is
    logged: taken, it would ride in every later request of the agent (Anthropic refuses such a
    request; OpenAI's adapter would send it without the block). So is content of no block, or of
    nothing but text of only whitespace: sent, a prompt would reach each provider differently
    (Anthropic refuses a blank text block: it was dropped, or sent as a placeholder when alone),
    and steering or context as an empty envelope."""
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


async def test_a_steer_that_says_nothing_is_refused_while_a_turn_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.15: steering the running turn with blank text raises, and no steering is logged."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("nap", '{"seconds": 10}', id="c1")]), Reply("ok")]
    )
    async with runtime(model, tools=[nap]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        assert agent.status == "running"
        with pytest.raises(ValueError, match=_SAYS_NOTHING):
            agent.steer(" ")
        await agent.wait_idle()
        assert [event.type for event in agent.session.events if "steering" in event.type] == []


@_NOTHING
def test_a_listener_cannot_rewrite_a_prompt_to_nothing(content: object) -> None:
    """R6.6: ``Allow.content`` becomes the user's message in place of the prompt; one saying
    nothing is refused where the listener builds it (``Block`` drops a prompt). A context
    saying nothing is still none: a lookup that found nothing is no error."""
    with pytest.raises(ValueError, match=_SAYS_NOTHING):
        Allow(content=content)  # type: ignore[arg-type]
    assert Allow(additional_context=HookContext(content)).additional_context is None  # type: ignore[arg-type]


def test_a_prompt_keeps_text_and_blocks_it_may_hold() -> None:
    """R1.1: text and blocks of kinds retinue does not model still pass through."""
    opaque = OpaqueBlock("image", {"url": "https://example.com/a.png"})
    context = HookContext([Text("look"), opaque])
    assert context.content == (Text("look"), opaque)


@_NOTHING
async def test_a_tool_result_s_context_that_says_nothing_is_none(
    content: object, autojump_clock: trio.testing.MockClock
) -> None:
    """R9.4, R6.6: a ``tools/execute`` wrapper's result carrying a context that says nothing
    shows no context and the turn completes, as a decision's blank context is none; the
    loop injects a result's context through the verb that refuses empty content."""

    async def blank(execution: object, proceed: Any) -> Any:
        result = await proceed()
        return attrs.evolve(result, additional_context=HookContext(content))  # type: ignore[arg-type]

    model = ScriptedModel([CallTools([ToolCallSpec("lookup", "{}", id="c1")]), Reply("done")])
    async with runtime(model, tools=[lookup]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/execute", blank, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "completed", result
        assert [e.type for e in agent.session.events if e.type == "context/message"] == []
    blank_context = HookContext(content)  # type: ignore[arg-type]
    assert (
        ToolExecutionResult("c1", "ok", additional_context=blank_context).additional_context is None
    )
