"""A listener's result its seam does not take is reported naming the listener (R6.3, R9.3)."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue.hooks import PreToolDecision
from retinue.prompt import Assembly
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
