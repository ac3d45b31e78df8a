"""The mock's echo policy: which tools it calls and when (built-in tools, ``tool_choice``, a
forced tool after its results), the answer after tool results, the output limit and plain
echoes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import attrs
import httpx2
import pytest
import trio

from retinue._content import Message, Text, ToolCall, ToolResultBlock
from retinue._stream import TextDelta
from retinue.providers.mock import EchoPolicy, MockCall, MockServer, open_mock_server

from ._mock_server_kit import APIS, PATHS, REAL_DEADLINE
from .support import WEATHER, collect, make_request, served_by


@pytest.mark.parametrize("api", APIS)
async def test_mock_echo_policy_calls_tools_then_answers(api: str) -> None:
    """Offered tools are called with schema-shaped arguments; tool results get a text answer."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(EchoPolicy(chunks=6)) as server,
            served_by(api, server) as model,
        ):
            first = await collect(model, make_request("weather in Oslo?", tools=[WEATHER]))
            calls = [b for b in first.message.content if isinstance(b, ToolCall)]
            assert calls
            assert first.assembler.finish.kind == "tool-calls"
            for call in calls:
                assert call.name == "lookup"
                assert isinstance(json.loads(call.arguments)["city"], str)
            history = [
                Message("user", (Text("weather in Oslo?"),)),
                first.message,
                *(Message("user", (ToolResultBlock(c.id, (Text("sunny"),)),)) for c in calls),
            ]
            second = await collect(model, make_request(*history, tools=[WEATHER]))
            assert second.assembler.finish.kind == "stop"
            text = second.message.content[0]
            assert isinstance(text, Text)
            assert "sunny" in text.text
            deltas = [c for c in second.chunks if isinstance(c, TextDelta)]
            assert len(deltas) == 6


CONTEXT = '<context source="clock">it is noon</context>'


async def _after_results(model: Any, result: str, *after: str) -> list[Message]:
    """A first call's tool calls, each answered *result*, then a user message per *after*."""
    first = await collect(model, make_request("weather in Oslo?", tools=[WEATHER]))
    calls = [b for b in first.message.content if isinstance(b, ToolCall)]
    assert calls
    return [
        Message("user", (Text("weather in Oslo?"),)),
        first.message,
        *(Message("user", (ToolResultBlock(c.id, (Text(result),)),)) for c in calls),
        *(Message("user", (Text(text),)) for text in after),
    ]


@pytest.mark.parametrize("api", APIS)
async def test_mock_echo_policy_answers_tool_results_followed_by_a_context_message(
    api: str,
) -> None:
    """Tool results followed by a ``<context>`` message (the adapters send it after the
    results) still get a text answer quoting the results, on every API alike.
    """
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(EchoPolicy()) as server, served_by(api, server) as model:
            history = await _after_results(model, "sunny", CONTEXT)
            second = await collect(model, make_request(*history, tools=[WEATHER]))
    assert second.assembler.finish.kind == "stop"
    assert not any(isinstance(block, ToolCall) for block in second.message.content)
    text = second.message.content[0]
    assert isinstance(text, Text)
    assert text.text.startswith("Done. The tools said: sunny")


@pytest.mark.parametrize("api", APIS)
async def test_mock_echo_policy_takes_a_prompt_after_tool_results_as_new_input(api: str) -> None:
    """A prompt after the results (the next one, after a turn a cancel cut short in its tools,
    which the model never answered) is new input: it calls the tools again, on every API alike,
    as ``ScriptedModel.tool_loop`` does; with no tool to call it echoes that prompt, not the
    results before it (one Anthropic user message holds both)."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(EchoPolicy()) as server, served_by(api, server) as model:
            history = await _after_results(model, "cancelled", CONTEXT, "and in Bergen?")
            again = await collect(model, make_request(*history, tools=[WEATHER]))
            echoed = await collect(model, make_request(*history))
    assert again.assembler.finish.kind == "tool-calls"
    assert [b.name for b in again.message.content if isinstance(b, ToolCall)][:1] == ["lookup"]
    assert echoed.message.content == (Text("You said: and in Bergen?"),)


LOOKUP_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
BUILT_IN_TOOLS: dict[str, list[dict[str, Any]]] = {
    "chat": [{"type": "custom", "custom": {"name": "grammar_tool"}}],
    "responses": [{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["v"]}],
    "messages": [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"type": "bash_20250124", "name": "bash"},
    ],
}
FUNCTION_TOOLS: dict[str, list[dict[str, Any]]] = {
    "chat": [{"type": "function", "function": {"name": "lookup", "parameters": LOOKUP_SCHEMA}}],
    "responses": [{"type": "function", "name": "lookup", "parameters": LOOKUP_SCHEMA}],
    "messages": [
        {"name": "lookup", "input_schema": LOOKUP_SCHEMA},
        {"type": "custom", "name": "find", "input_schema": LOOKUP_SCHEMA},
    ],
}


def _called_names(api: str, body: dict[str, Any]) -> list[str]:
    """The names of the tools a reply body calls."""
    if api == "chat":
        calls = body["choices"][0]["message"].get("tool_calls") or []
        return [call["function"]["name"] for call in calls]
    items = body["output"] if api == "responses" else body["content"]
    kind = "function_call" if api == "responses" else "tool_use"
    return [item["name"] for item in items if item["type"] == kind]


async def _tool_names_called(
    api: str, tools: list[dict[str, Any]], **asks: object
) -> list[list[str]]:
    """The tools the echo model calls for twelve different prompts offering *tools*."""
    server = MockServer(EchoPolicy(max_tool_calls=3))
    called = []
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        for number in range(12):
            body: dict[str, Any] = {"model": "m", "max_tokens": 100, "tools": tools, **asks}
            prompt = f"search {number}"
            if api == "responses":
                body["input"] = prompt
            else:
                body["messages"] = [{"role": "user", "content": prompt}]
            response = await client.post(f"http://mock{PATHS[api]}", json=body)
            called.append(_called_names(api, response.json()))
    return called


@pytest.mark.parametrize("api", APIS)
async def test_mock_echo_policy_calls_only_client_function_tools(
    autojump_clock: trio.abc.Clock, api: str
) -> None:
    """Built-in and server tools, which the provider runs, are never called as functions;
    the function tools beside them are.
    """
    with trio.fail_after(60):
        mixed = await _tool_names_called(api, BUILT_IN_TOOLS[api] + FUNCTION_TOOLS[api])
        built_in_only = await _tool_names_called(api, BUILT_IN_TOOLS[api])
    functions = {
        str(t.get("name") or t.get("function", {}).get("name")) for t in FUNCTION_TOOLS[api]
    }
    assert all(names and set(names) <= functions for names in mixed)
    assert built_in_only == [[]] * 12


def _function_tools(api: str, *names: str) -> list[dict[str, Any]]:
    if api == "chat":
        return [
            {"type": "function", "function": {"name": name, "parameters": LOOKUP_SCHEMA}}
            for name in names
        ]
    if api == "responses":
        return [{"type": "function", "name": name, "parameters": LOOKUP_SCHEMA} for name in names]
    return [{"name": name, "input_schema": LOOKUP_SCHEMA} for name in names]


TOOL_ASKS: dict[str, dict[str, dict[str, object]]] = {
    "none": {
        "chat": {"tool_choice": "none"},
        "responses": {"tool_choice": "none"},
        "messages": {"tool_choice": {"type": "none"}},
    },
    "only b": {
        "chat": {"tool_choice": {"type": "function", "function": {"name": "b"}}},
        "responses": {"tool_choice": {"type": "function", "name": "b"}},
        "messages": {"tool_choice": {"type": "tool", "name": "b"}},
    },
    "one at a time": {
        "chat": {"parallel_tool_calls": False},
        "responses": {"parallel_tool_calls": False},
        "messages": {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
    },
    "allowed b": {  # OpenAI's allowed tools; Anthropic's forced tool stands in for them
        "chat": {
            "tool_choice": {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [{"type": "function", "function": {"name": "b"}}],
                },
            }
        },
        "responses": {
            "tool_choice": {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "b"}],
            }
        },
        "messages": {"tool_choice": {"type": "tool", "name": "b"}},
    },
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("ask", list(TOOL_ASKS))
async def test_mock_echo_policy_calls_the_tools_the_request_lets_it(
    autojump_clock: trio.abc.Clock, api: str, ask: str
) -> None:
    """``tool_choice`` and the parallel calls flag are heeded in each wire format: no call
    for ``none``, only the named tool when one is forced, one call at a time when parallel
    calls are off: a forced tool never comes with others, nor two calls with parallel
    calls off."""
    with trio.fail_after(60):
        called = await _tool_names_called(
            api, _function_tools(api, "a", "b", "c"), **TOOL_ASKS[ask][api]
        )
    if ask == "none":
        assert called == [[]] * 12
    elif ask in ("only b", "allowed b"):
        assert called == [["b"]] * 12
    else:
        assert all(len(names) == 1 for names in called)


AFTER_RESULTS: dict[str, dict[str, Any]] = {
    "chat": {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "b", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ]
    },
    "responses": {
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "b", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ]
    },
    "messages": {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "b", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}],
            },
        ]
    },
}


async def _answer(api: str, **body: Any) -> httpx2.Response:
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        return await client.post(
            f"http://mock{PATHS[api]}", json={"model": "m", "max_tokens": 100, **body}
        )


@pytest.mark.parametrize("api", APIS)
async def test_mock_echo_policy_calls_a_forced_tool_again_after_its_results(api: str) -> None:
    """A tool the request forces is called after tool results too, as the real models do;
    left to the model, the results get a text answer. A forced tool not offered is a 400
    in the API's shape, as the real APIs answer, not a text answer."""
    tools = _function_tools(api, "a", "b")
    forced, history = TOOL_ASKS["only b"][api], AFTER_RESULTS[api]
    with trio.fail_after(REAL_DEADLINE):
        again = await _answer(api, tools=tools, **forced, **history)
        free = await _answer(api, tools=tools, **history)
        missing = await _answer(api, tools=_function_tools(api, "a"), **forced, **history)
    assert _called_names(api, again.json()) == ["b"]
    assert _called_names(api, free.json()) == []
    assert missing.status_code == 400
    assert "tool_choice requires a call of b, but no such tool is offered" in missing.text


@pytest.mark.parametrize("api", APIS)
async def test_mock_echo_policy_stops_at_the_output_limit_asked(api: str) -> None:
    """A reply longer than the request's output limit is cut there, finishing as the API
    does at its limit, with usage within it, never ending ``stop`` past the limit."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, served_by(api, server) as model:
            request = make_request("ping pong " * 20)
            result = await collect(
                model, attrs.evolve(request, config=attrs.evolve(request.config, max_tokens=16))
            )
    assert result.assembler.finish.kind == "max-tokens"
    assert result.assembler.usage is not None
    assert result.assembler.usage.output_tokens <= 16


@pytest.mark.parametrize("api", APIS)
async def test_mock_echo_policy_echoes_without_tools(api: str) -> None:
    """Without tools the reply echoes the prompt, with usage."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, served_by(api, server) as model:
            result = await collect(model, make_request("ping pong"))
    text = result.message.content[0]
    assert isinstance(text, Text)
    assert text.text.startswith("You said: ping pong")
    assert result.assembler.usage is not None
    assert result.assembler.usage.output_tokens > 0


_MANY_ENVELOPES = """
import sys
from retinue.providers.mock import MockCall
context = '<context source="clock">it is noon</context>'
results = [{"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "x"}]
for tail, expected in (("", True), ("next", False)):
    messages = [*results, *({"role": "user", "content": context} for _ in range(5000))]
    if tail:
        messages.append({"role": "user", "content": tail})
    call = MockCall("chat", {"messages": messages}, {}, 1)
    assert call.after_tool_results is expected, tail
print("judged")
"""


def test_a_long_run_of_envelopes_after_tool_results_is_judged_in_one_pass() -> None:
    """Thousands of context messages after the results (a turn cut short, then many
    injects), then a prompt: judged at once, where a pattern trying every way to split the
    run would hold the server's thread for ever. In a child process, which a timeout ends."""
    judged = subprocess.run(
        [sys.executable, "-c", _MANY_ENVELOPES],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert judged.returncode == 0, judged.stderr
    assert judged.stdout == "judged\n"


def test_a_prompt_with_no_text_after_tool_results_is_new_input() -> None:
    """An image alone after the results is new input, as a text prompt is: only context and
    steering envelopes, which always hold text, leave the results the last input."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    results = [
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "content": "x"},
    ]
    context = {"role": "user", "content": CONTEXT}
    for after, expected in (
        ([context], True),
        ([context, {"role": "user", "content": [image]}], False),
    ):
        call = MockCall("chat", {"messages": [*results, *after]}, {}, 1)
        assert call.after_tool_results is expected, after
