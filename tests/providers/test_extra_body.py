"""``extra_body``: request fields an adapter has no setting for, as the SDKs' per-call
``extra_body``, merged into the top level of every body the adapter sends.

Checked as lossless JSON and frozen when the adapter is built; the fields the adapter
builds for each request are refused there, so none can replace the transcript.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

from retinue._content import Message, Text, ToolCall, ToolResultBlock
from retinue._request import ToolSchema
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockServer
from retinue.providers.openai import OpenAIModel
from retinue.session import InvalidJsonError

from ._request_validity_kit import adapter
from .support import collect, make_request

_EXTRA: dict[str, dict[str, Any]] = {
    "chat": {
        "tool_choice": "none",
        "parallel_tool_calls": False,
        "reasoning_effort": "low",
        "response_format": {"type": "json_object"},
        "seed": 7,
        "top_p": 0.5,
        "metadata": {"user": "u1"},
        "store": False,
    },
    "responses": {
        "reasoning": {"effort": "low", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "text": {"format": {"type": "json_object"}},
        "tool_choice": "auto",
        "store": False,
    },
    "messages": {"top_k": 5, "metadata": {"user_id": "u1"}, "tool_choice": {"type": "auto"}},
}


_TOOLS = (ToolSchema("lookup", "Look a city up.", {"type": "object", "properties": {}}),)


async def _sent(api: str, *history: Message | str, **options: Any) -> list[Any]:
    """The bodies two requests of *api*'s adapter send, as the mock server received them."""
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with adapter(api, server, **options) as model:
            for _ in range(2):
                await collect(model, make_request(*history))
    return [call.body for call in server.calls]


@pytest.mark.parametrize("api", list(_EXTRA))
async def test_every_request_carries_the_extra_fields_as_given_when_built(
    api: str, autojump_clock: trio.testing.MockClock
) -> None:
    """Each body has the fields beside its own; changing the caller's mapping (or a
    value inside it) after the adapter is built changes nothing sent."""
    extra = {key: _copy(value) for key, value in _EXTRA[api].items()}
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with adapter(api, server, extra_body=extra) as model:
            extra["seed"] = 99
            next(v for v in extra.values() if isinstance(v, dict))["changed"] = True
            for _ in range(2):
                await collect(model, make_request("hi", tools=_TOOLS))
    for call in server.calls:
        body: Any = call.body
        assert {key: body[key] for key in _EXTRA[api]} == _EXTRA[api]
        assert "seed" not in body or body["seed"] == 7
        assert body["model"] == "test-model"


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    return list(value) if isinstance(value, list) else value


_BUILT = [
    *(("chat", key) for key in ("model", "messages", "tools", "stream", "stream_options")),
    *(("chat", key) for key in ("max_tokens", "max_completion_tokens", "temperature", "stop")),
    ("chat", "n"),
    *(("responses", key) for key in ("model", "input", "instructions", "tools", "stream")),
    *(("responses", key) for key in ("max_output_tokens", "temperature")),
    ("responses", "previous_response_id"),
    ("responses", "conversation"),
    *(("messages", key) for key in ("model", "messages", "system", "tools", "stream")),
    *(("messages", key) for key in ("max_tokens", "temperature", "stop_sequences")),
]


def _build(api: str, **options: Any) -> OpenAIModel | AnthropicModel:
    if api == "messages":
        return AnthropicModel(base_url="http://mock", api_key="k", **options)
    return OpenAIModel(base_url="http://mock/v1", api_key="k", api=api, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(("api", "key"), _BUILT)
def test_a_field_the_adapter_builds_is_refused_when_built(api: str, key: str) -> None:
    """Set there, it would replace the transcript or a setting the agent gives."""
    with pytest.raises(ValueError, match=rf"^extra_body\.{key}: .* sets this field"):
        _build(api, extra_body={"top_p": 0.5, key: "x"})


def test_anthropic_thinking_is_refused_beside_a_thinking_budget_only() -> None:
    with pytest.raises(ValueError, match=r"^extra_body\.thinking: "):
        _build("messages", thinking_budget=1024, extra_body={"thinking": {"type": "adaptive"}})
    _build("messages", extra_body={"thinking": {"type": "adaptive"}})


@pytest.mark.parametrize(
    ("extra_body", "error", "named"),
    [
        ([("top_p", 0.5)], TypeError, "extra_body must be a mapping"),
        ({"top_p": math.nan}, InvalidJsonError, "extra_body.top_p"),
        ({"metadata": {"ids": {1, 2}}}, InvalidJsonError, "extra_body.metadata.ids"),
        ({1: "x"}, InvalidJsonError, "non-string key 1"),
        ({"seed": b"7"}, InvalidJsonError, "extra_body.seed"),
    ],
)
@pytest.mark.parametrize("api", list(_EXTRA))
def test_extra_fields_that_are_no_lossless_json_are_refused_when_built(
    api: str, extra_body: Any, error: type[Exception], named: str
) -> None:
    """A ``TypeError`` (``InvalidJsonError`` is one) naming the key and its path."""
    with pytest.raises(error, match=named.replace(".", r"\.")) as raised:
        _build(api, extra_body=extra_body)
    assert isinstance(raised.value, TypeError)


async def test_anthropic_thinking_from_extra_body_is_left_out_beside_a_loop_begun_without_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As a ``thinking_budget``'s is: the API would refuse the request."""
    call = ToolCall("c1", "lookup", '{"city": "Oslo"}')
    loop = [
        Message("user", (Text("Weather in Oslo?"),)),
        Message("assistant", (call,)),
        Message("user", (ToolResultBlock("c1", (Text("Oslo: sunny"),)),)),
    ]
    adaptive = {"thinking": {"type": "adaptive"}}
    mid_loop, *_ = await _sent("messages", *loop, extra_body=adaptive)
    fresh, *_ = await _sent("messages", "hi", extra_body=adaptive)
    assert "thinking" not in mid_loop
    assert fresh["thinking"] == {"type": "adaptive"}


@pytest.mark.parametrize("api", list(_EXTRA))
async def test_tool_only_fields_go_only_to_a_request_with_tools(
    api: str, autojump_clock: trio.testing.MockClock
) -> None:
    """``tool_choice`` and ``parallel_tool_calls`` without ``tools`` are refused by the
    APIs: a request without tools goes without them, its other extra fields kept."""
    extra = {"tool_choice": "auto", "parallel_tool_calls": False, "metadata": {"k": "v"}}
    if api == "messages":
        extra = {"tool_choice": {"type": "auto"}, "metadata": {"user_id": "u1"}}
    [bare, *_] = await _sent(api, "hi", extra_body=extra)
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with adapter(api, server, extra_body=extra) as model:
            await collect(model, make_request("hi", tools=_TOOLS))
    [tooled] = [call.body for call in server.calls]
    assert {key: bare[key] for key in bare if key in extra} == {"metadata": extra["metadata"]}
    assert {key: tooled[key] for key in extra} == extra


@pytest.mark.parametrize("forced", [{"type": "any"}, {"type": "tool", "name": "lookup"}])
def test_anthropic_refuses_a_forced_tool_beside_a_thinking_budget(forced: Any) -> None:
    """The API refuses thinking beside a tool_choice that forces a tool: refused when the
    adapter is built, where each request failed with the server's 400; ``auto`` is kept."""
    with pytest.raises(ValueError, match=r"^extra_body\.tool_choice: .* forces tool use"):
        _build("messages", thinking_budget=1024, extra_body={"tool_choice": forced})
    _build("messages", thinking_budget=1024, extra_body={"tool_choice": {"type": "auto"}})
    _build("messages", extra_body={"tool_choice": forced})
