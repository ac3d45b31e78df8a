"""A listener's result its seam does not take is reported naming the listener (R6.3, R9.3)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import Message, Text
from retinue.hooks import Allow, Block, PreToolDecision
from retinue.prompt import Assembly
from retinue.providers import LlmCallConfig
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, Next, of_type, runtime, texts


@retinue.tool
async def remove(path: str) -> str:
    """Remove a file.

    Args:
        path: The file.
    """
    await trio.lowlevel.checkpoint()
    return f"removed {path}"


class Policies:
    """Many listeners of one user, each a method: the error must say which one."""

    async def allow(self, _execution: object, call_next: Next) -> PreToolDecision:
        return await call_next()

    def deny_text(self, _execution: object, _call_next: Next) -> object:
        return "not allowed"

    async def assemble(self, _agent: object, _assembly: Assembly, call_next: Next) -> object:
        await call_next()
        return "You are terse."


async def test_a_pre_execute_listener_returning_text_is_named_in_the_tool_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.8, R9.3: the call's logged result names the listener that returned no decision,
    by its qualified name, among the others of its seam."""
    model = ScriptedModel([CallTools([ToolCallSpec("remove", '{"path": "x"}')]), Reply("ok")])
    policies = Policies()
    async with runtime(model, tools=[remove]) as rt:
        rt.hooks.on("tools/pre-execute", policies.allow)
        rt.hooks.on("tools/pre-execute", policies.deny_text)  # type: ignore[call-overload]
        rt.hooks.on("tools/pre-execute", policies.allow)
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("go")
    (event,) = of_type(agent.session.events, "tool/result")
    assert texts(event.data.content) == (  # type: ignore[union-attr]
        f"Error: a tools/pre-execute listener ({__name__}.Policies.deny_text) returned "
        "'not allowed', not Allow, Deny or Ask"
    )


async def test_an_assemble_listener_returning_text_is_named_in_the_turn_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.51: the turn's logged error names the assemble listener that returned no Assembly."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        rt.hooks.on("system-prompt/assemble", Policies().assemble)  # type: ignore[call-overload]
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
    (end,) = of_type(agent.session.events, "turn/end")
    assert end.data.reason == result.reason  # type: ignore[union-attr]
    assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
    assert result.reason.message == (
        f"a system-prompt/assemble listener ({__name__}.Policies.assemble) returned "
        "'You are terse.', not Assembly"
    )


class Rewrites:
    """Listeners returning a value of the seam's type that the seam still cannot use."""

    async def keep(self, *args: object) -> object:
        call_next: Next = args[-1]  # type: ignore[assignment]
        return await call_next()

    def block_with_feedback(self, *_args: object) -> object:
        return Block("no", feedback="use the sandbox")

    def zero_tokens(self, *args: object) -> object:
        config: LlmCallConfig = args[-2]  # type: ignore[assignment]
        return attrs.evolve(config, max_tokens=0)

    def user_message(self, *_args: object) -> object:
        return Message("user", (Text("x"),))

    def allow_rewritten(self, *_args: object) -> object:
        return Allow(content="rm -rf /tmp")

    def empty_block(self, *_args: object) -> object:
        return Block()


TURN_REFUSALS = {
    "agent/prompt-submit": (
        "block_with_feedback",
        "a Block with feedback or additional_context: a blocked prompt takes only a reason",
    ),
    "agent/request": ("zero_tokens", "a config with max_tokens 0"),
    "agent/step-result": (
        "user_message",
        "a user message: the step's message is the assistant's",
    ),
}


@pytest.mark.parametrize("seam", sorted(TURN_REFUSALS))
async def test_a_result_of_the_right_type_its_seam_cannot_use_names_the_listener(
    seam: str, autojump_clock: trio.testing.MockClock
) -> None:
    """R6.3, R6.6, R7.37: the turn's error names the listener, among others of its seam, that
    returned a value of the right type the seam refuses, not the seam alone."""
    method, problem = TURN_REFUSALS[seam]
    rewrites = Rewrites()
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        hooks: Any = rt.hooks  # a seam named by a variable: no overload of on() knows it
        hooks.on(seam, rewrites.keep)
        hooks.on(seam, getattr(rewrites, method))
        hooks.on(seam, rewrites.keep)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
    (end,) = of_type(agent.session.events, "turn/end")
    assert end.data.reason == result.reason  # type: ignore[union-attr]
    assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
    assert result.reason.message == (
        f"an {seam} listener ({__name__}.Rewrites.{method}) returned {problem}"
    )


TOOL_REFUSALS = {
    "tools/pre-execute": (
        "allow_rewritten",
        (
            "an Allow with content or additional_context: a call cannot be rewritten before "
            "it runs, so they would be lost"
        ),
    ),
    "tools/post-execute": (
        "empty_block",
        (
            "a Block with neither feedback nor a reason: the model would see an empty error "
            "in place of the result"
        ),
    ),
}


@pytest.mark.parametrize("seam", sorted(TOOL_REFUSALS))
async def test_a_tool_decision_its_seam_cannot_use_names_the_listener_in_the_result(
    seam: str, autojump_clock: trio.testing.MockClock
) -> None:
    """R6.8, R6.9, R9.3: the call's logged result names the listener whose decision the seam cannot
    use, not the seam alone."""
    method, problem = TOOL_REFUSALS[seam]
    model = ScriptedModel([CallTools([ToolCallSpec("remove", '{"path": "x"}')]), Reply("ok")])
    rewrites = Rewrites()
    async with runtime(model, tools=[remove]) as rt:
        hooks: Any = rt.hooks  # a seam named by a variable: no overload of on() knows it
        hooks.on(seam, rewrites.keep)
        hooks.on(seam, getattr(rewrites, method))
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("go")
    (event,) = of_type(agent.session.events, "tool/result")
    assert event.data.is_error  # type: ignore[union-attr]
    assert texts(event.data.content) == (  # type: ignore[union-attr]
        f"Error: a {seam} listener ({__name__}.Rewrites.{method}) returned {problem}"
    )
