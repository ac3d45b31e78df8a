"""System-prompt templates and the settings a request carries (R2.6, R7.32, R7.52, R8.1)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from retinue import AgentOptions, Message, Text
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest
from retinue.prompt import PromptError, Section, check_template, render
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.testing import Reply, ScriptedModel
from tests.helpers import Next, runtime

ESCAPED_JSON = r'{"a": {"b": 1\}} '


@pytest.mark.timeout(20)  # copying the text before each escape would take minutes, not a blink
def test_a_template_with_many_escaped_braces_is_parsed_in_linear_time() -> None:
    """R7.52: a long template of escaped braces (embedded JSON) is checked and rendered at once."""
    text = ESCAPED_JSON * 150_000 + "{{name}}"
    check_template(text, "persona")
    rendered = render([Section("persona", text)], {"name": "Ada"})
    assert rendered == ('{"a": {"b": 1}} ' * 150_000 + "Ada").strip()


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        (r"\{{{{name}}\}}", "{{Ada}}"),
        (r"a\}}b{{name}}c\{{d{{name}}", "a}}bAdac{{dAda"),
        ("{{{name}}}{{name}}", "{Ada}Ada"),
        ("{{name}}", "Ada"),
        (r"\}}", "}}"),
    ],
)
def test_escapes_and_groups_render_in_place_next_to_each_other(text: str, rendered: str) -> None:
    """R7.52: literal text, escapes and values keep their order however they alternate."""
    assert render([Section("s", text)], {"name": "Ada"}) == rendered


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        (r"C:\\{{dir}}", "C:\\Ada"),
        (r"C:\Users\\{{dir}}\notes", r"C:\Users\Ada\notes"),
        (r"\\\\{{dir}}", r"\\Ada"),
        (r"\\\{{dir\}}", r"\{{dir}}"),
        (r"{{dir}}\\\}}", r"Ada\}}"),
        (r"\\{{{dir}}}", r"\{Ada}"),
    ],
)
def test_a_backslash_written_twice_before_a_group_is_one_backslash(
    text: str, rendered: str
) -> None:
    """R7.52: before ``{{`` or ``}}`` each pair of backslashes is one backslash and an odd one left
    escapes the braces, so a path can end in a variable (``C:\\\\{{dir}}``): a backslash may precede
    a group, its braces not taken for an escape."""
    check_template(text, "persona")
    assert render([Section("persona", text)], {"dir": "Ada"}) == rendered


@pytest.mark.parametrize("text", [r"C:\{{dir}}", r"\\\{{dir}}", r"a\\}}"])
def test_a_backslash_before_a_group_once_says_how_to_write_it(text: str) -> None:
    """R7.52: an odd backslash before ``{{`` escapes it, leaving the group's ``}}`` alone; the
    error says how to write a backslash before a variable."""
    with pytest.raises(PromptError, match=r"lone '}}'.*\\\\\{\{ for a backslash before a variable"):
        check_template(text, "persona")


async def test_a_request_listener_cannot_set_a_max_tokens_no_api_accepts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.6, R8.1: a config from ``agent/request`` with ``max_tokens=0`` ends the turn with an
    error, rather than a log saying 0 while the Anthropic adapter sends its default."""
    model = ScriptedModel([Reply("a")])

    async def request(agent: object, turn: int, step: int, config: object, next_: Next) -> Any:
        return attrs.evolve(await next_(), max_tokens=0)

    async with runtime(model) as rt:
        rt.hooks.on("agent/request", request)
        agent = await rt.create_agent("a", AgentOptions(model="m", max_tokens=100))
        result = await agent.ask("q")
    if model.requests:
        sent = anthropic_request_body(model.requests[0])["max_tokens"]
        assert sent == model.requests[0].max_tokens, "the log's max_tokens is not what is sent"
    assert result.reason.kind == "error"


def test_the_anthropic_body_sends_the_max_tokens_the_request_holds() -> None:
    """R8.1: what the log says the request's ``max_tokens`` is, for any value it can hold: a 0 is
    not taken for no limit and sent as the adapter's default."""
    for limit in (0, 1, 4096, 100_000):
        request = ModelRequest(
            LlmCallConfig("m", max_tokens=limit),
            MessageHistory((Message("user", (Text("hi"),)),)),
        )
        assert anthropic_request_body(request)["max_tokens"] == limit


async def test_a_resumed_agent_without_a_model_keeps_the_settings_its_options_give(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.32, R2.5: resumed without a model, the agent continues with the stored model, but the
    temperature, max_tokens and stop its options set are what its requests carry."""
    model = ScriptedModel([Reply("a"), Reply("b")])
    async with runtime(model) as rt:
        first = await rt.create_agent("a", AgentOptions(model="m", temperature=1.0), session_id="s")
        await first.ask("one")
        await first.dispose()
        options = AgentOptions(temperature=0.0, max_tokens=50, stop=["END"])
        resumed = await rt.resume_agent("s", options)
        assert (await resumed.ask("two")).reason.kind == "completed"
    config = model.requests[-1].config
    assert config.model == "m"
    assert (config.temperature, config.max_tokens, config.stop) == (0.0, 50, ("END",))


async def test_the_static_prompt_renders_each_variable_of_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.52: ``provider``, ``model`` and ``cwd`` come from the agent's options and session."""
    model = ScriptedModel([Reply("a")])
    template = "{{model}} at {{provider}} in {{cwd}}: {{{site}}}"
    async with runtime(model, system_prompt=template, variables={"site": "x"}) as rt:
        options = AgentOptions(model="m", provider="p", cwd="/srv")
        agent = await rt.create_agent("a", options)
        await agent.ask("q")
    assert model.requests[0].system == "m at p in /srv: {x}"


async def test_a_resumed_agent_renders_the_model_it_goes_on_with(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.32, R7.52: resumed without a model, the agent goes on with the stored one, and
    ``{{model}}`` and ``{{provider}}`` render it: unset, they would fail every resumed turn with
    ``PROMPT_RENDER``."""
    model = ScriptedModel([Reply("a"), Reply("b"), Reply("c")])
    template = "You are {{model}} at {{provider}}."
    async with runtime(model, system_prompt=template) as rt:
        first = await rt.create_agent("a", AgentOptions(model="m", provider="p"), session_id="s")
        await first.ask("one")
        await first.dispose()
        resumed = await rt.resume_agent("s")
        assert (await resumed.ask("two")).reason.kind == "completed"
        await resumed.dispose()
        moved = await rt.resume_agent("s", AgentOptions(provider="q"))
        assert (await moved.ask("three")).reason.kind == "completed"
    systems = [request.system for request in model.requests]
    assert systems == ["You are m at p.", "You are m at p.", "You are m at q."]


async def test_a_fresh_agent_keeps_the_variables_its_options_give_after_its_first_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.52: only an agent made on a stored session renders the model it goes on with; a
    fresh one whose model an ``agent/request`` listener picks keeps the runtime's variables
    for every step (they changed after its first request)."""
    model = ScriptedModel([Reply("a"), Reply("b")])

    async def request(agent: object, turn: int, step: int, config: object, next_: Next) -> Any:
        return attrs.evolve(await next_(), model="scripted")

    async def assemble(agent: object, base: object, next_: Next) -> Any:
        return await next_()

    template = "You are {{model}}."
    async with runtime(model, system_prompt=template, variables={"model": "house"}) as rt:
        rt.hooks.on("agent/request", request)
        rt.hooks.on("system-prompt/assemble", assemble)
        agent = await rt.create_agent("a", AgentOptions())
        await agent.ask("one")
        await agent.ask("two")
    assert [request.system for request in model.requests] == ["You are house."] * 2


async def test_a_resumed_agent_without_a_provider_keeps_the_stored_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.32, R2.5: resumed with options that name no provider (nor model), the agent's
    requests carry the stored provider; options that name one carry that one."""
    model = ScriptedModel([Reply("a"), Reply("b"), Reply("c")])
    async with runtime(model) as rt:
        first = await rt.create_agent("a", AgentOptions(model="m", provider="p"), session_id="s")
        await first.ask("one")
        await first.dispose()
        resumed = await rt.resume_agent("s", AgentOptions(temperature=0.5))
        assert (await resumed.ask("two")).reason.kind == "completed"
        await resumed.dispose()
        moved = await rt.resume_agent("s", AgentOptions(provider="q"))
        assert (await moved.ask("three")).reason.kind == "completed"
    providers = [(r.config.model, r.config.provider) for r in model.requests]
    assert providers == [("m", "p"), ("m", "p"), ("m", "q")]


async def test_a_request_listener_may_set_the_smallest_max_tokens(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.6, R8.1: ``max_tokens=1`` from ``agent/request`` is a limit every API takes: the
    request carries it and the turn completes (only values below 1 are refused)."""
    model = ScriptedModel([Reply("a")])

    async def request(agent: object, turn: int, step: int, config: object, next_: Next) -> Any:
        return attrs.evolve(await next_(), max_tokens=1)

    async with runtime(model) as rt:
        rt.hooks.on("agent/request", request)
        agent = await rt.create_agent("a", AgentOptions(model="m", max_tokens=100))
        result = await agent.ask("q")
    assert result.reason.kind == "completed"
    assert model.requests[0].config.max_tokens == 1
