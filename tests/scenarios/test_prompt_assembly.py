"""The ``system-prompt/assemble`` waterfall (R7.51-R7.53)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue.prompt import Assembly, Section
from retinue.testing import CallTools, RebuildCheckedModel, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, Next, echo, runtime


@retinue.tool
async def other(text: str) -> str:
    """A second tool the assembly may drop.

    Args:
        text: Anything.
    """
    await trio.lowlevel.checkpoint()
    return text


async def test_assemble_listener_rewrites_sections_variables_and_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.51: the waterfall receives the assembly and its result is what the request carries."""
    model = ScriptedModel([Reply("ok")])
    seen: list[Assembly] = []

    async def assemble(agent: object, assembly: Assembly, call_next: Next) -> Assembly:
        seen.append(await call_next())
        return attrs.evolve(
            assembly,
            sections=(*assembly.sections, Section("rules", "Answer in {{tone}}.", 10)),
            tools=tuple(tool for tool in assembly.tools if tool.name == "echo"),
            variables={**assembly.variables, "tone": "haiku"},
        )

    async with runtime(model, tools=[echo, other], system_prompt="Base for {{model}}.") as rt:
        rt.hooks.on("system-prompt/assemble", assemble)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
    assert result.reason.kind == "completed"
    [base] = seen
    assert [section.name for section in base.sections] == ["persona"]
    assert [tool.name for tool in base.tools] == ["echo", "other"]
    assert base.variables["model"] == "scripted"
    [request] = model.requests
    assert request.system == "Base for scripted.\n\nAnswer in haiku."
    assert [tool.name for tool in request.tools] == ["echo"]


async def test_assemble_listener_registered_later_applies_to_the_next_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.51: the prompt is not frozen once a listener exists; each request is assembled."""
    model = ScriptedModel([Reply("one"), Reply("two")])

    async def louder(agent: object, assembly: Assembly, call_next: Next) -> Assembly:
        assembly = await call_next()
        return attrs.evolve(assembly, sections=(Section("only", "LOUD", 0),))

    async with runtime(model, system_prompt="quiet") as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("first")
        rt.hooks.on("system-prompt/assemble", louder, agent=agent)
        await agent.ask("second")
    assert [request.system for request in model.requests] == ["quiet", "LOUD"]


async def test_assemble_listener_returning_the_wrong_type_fails_the_turn_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.51, R7.48: a bad assembly ends that turn with an error; the agent serves the next."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("fine")])
    broken = [True]

    async def assemble(agent: object, assembly: Assembly, call_next: Next) -> Any:
        if broken[0]:
            broken[0] = False
            return "not an assembly"
        return await call_next()

    async with runtime(model, tools=[echo]) as rt:
        rt.hooks.on("system-prompt/assemble", assemble)
        agent = await rt.create_agent("a", OPTIONS)
        failed = await agent.ask("first")
        served = await agent.ask("second")
    assert failed.reason.kind == "error"
    assert "Assembly" in (failed.reason.message or "")
    assert served.reason.kind == "completed"


async def test_assembly_render_error_ends_the_turn_with_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.52: an unknown variable added by the assembly fails the turn, not the driver."""
    model = ScriptedModel([Reply("never")], repeat_last=True)

    async def assemble(agent: object, assembly: Assembly, call_next: Next) -> Assembly:
        assembly = await call_next()
        return attrs.evolve(assembly, sections=(Section("bad", "{{missing}}", 0),))

    async with runtime(model) as rt:
        rt.hooks.on("system-prompt/assemble", assemble)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
    assert result.reason.kind == "error"
    assert result.reason.code == "PROMPT_RENDER"
    assert model.requests == []


async def test_agent_variables_shadow_the_runtime_s_of_the_same_name(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.51, R7.52: the agent's ``model`` shadows a runtime-wide ``model``; where the agent
    has no value (``provider`` here) the runtime's value is used.
    """
    model = ScriptedModel([Reply("one")])
    variables = {"model": "runtime-default", "provider": "runtime-provider"}
    async with runtime(
        model, system_prompt="{{model}} via {{provider}}", variables=variables
    ) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi")
    assert model.requests[0].system == "scripted via runtime-provider"


async def test_a_built_in_variable_the_agent_leaves_unset_has_no_value_rather_than_unknown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.51, R7.52: ``provider`` is a variable every agent has; with no provider set
    anywhere the turn's error says it has no value, not that no such variable exists."""
    model = ScriptedModel([Reply("never")], repeat_last=True)
    async with runtime(model, system_prompt="via {{provider}}") as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
    assert (result.reason.kind, result.reason.code) == ("error", "PROMPT_RENDER")
    assert "variable 'provider' has no value" in (result.reason.message or "")
    assert model.requests == []


@pytest.mark.parametrize(
    ("persona", "system"),
    [(None, "You are the runtime."), ("Agent.", "Agent."), ("", None), ("   ", None)],
    ids=["none", "text", "empty", "blank"],
)
async def test_an_agent_system_prompt_replaces_the_runtime_one_even_empty(
    autojump_clock: trio.testing.MockClock, persona: str | None, system: str | None
) -> None:
    """R2.7: an agent's ``system_prompt`` replaces the runtime's, an empty one as a blank one does:
    ``""`` does not keep the runtime's persona."""
    model = ScriptedModel([Reply("one")])
    async with runtime(model, system_prompt="You are the runtime.") as rt:
        agent = await rt.create_agent("a", AgentOptions(model="scripted", system_prompt=persona))
        await agent.ask("hi")
    assert model.requests[0].system == system


@pytest.mark.parametrize(
    "prompt",
    ['Answer with JSON like {"result": {"city": "..."}}', "Hello {{ name", "{{two words}}"],
)
async def test_a_system_prompt_with_a_syntax_error_is_refused_when_given(
    autojump_clock: trio.testing.MockClock, prompt: str
) -> None:
    """R7.52, R2.7: a static template that can never render is a ConfigError naming the option
    when the agent or runtime is built, instead of an error on every turn."""
    model = ScriptedModel([Reply("never")], repeat_last=True)
    with pytest.raises(retinue.ConfigError, match="system_prompt is not a valid prompt template"):
        AgentOptions(model="scripted", system_prompt=prompt)
    with pytest.raises(retinue.ConfigError, match="system_prompt is not a valid prompt template"):
        async with runtime(model, system_prompt=prompt):
            pass
    assert model.requests == []


async def test_escaped_braces_in_a_system_prompt_reach_the_model_literally(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.52: ``\\{{`` and ``\\}}`` let a persona show JSON; its variables still render per turn."""
    model = ScriptedModel([Reply("ok")])
    persona = r'Reply as {"result": {"model": "{{model}}"\}}'
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", AgentOptions(model="scripted", system_prompt=persona))
        result = await agent.ask("hi")
    assert result.reason.kind == "completed"
    assert model.requests[0].system == 'Reply as {"result": {"model": "scripted"}}'


async def test_a_system_prompt_holding_a_split_surrogate_pair_is_sent_as_the_log_records_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R8.1, R8.9, R1.6: the request's system prompt is the string its header logs, a pair
    held as two code points joined in both, so the log rebuilds every request."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    checked = RebuildCheckedModel(model)
    async with runtime(
        checked, system_prompt="Smile \ud83d{{face}}", variables={"face": "\ude00"}
    ) as rt:
        checked.follow(rt)
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("one")
        await agent.ask("two")
    assert checked.failures == []
    assert [request.system for request in model.requests] == ["Smile \U0001f600"] * 2
    header = agent.session.current_header
    assert header is not None
    assert header.system == "Smile \U0001f600"
