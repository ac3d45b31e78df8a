"""Every object the mock server sends validates, strictly, as the official SDKs' own types.

Replies, streamed or not, in-stream errors, error bodies and the stream that
never ends: an SDK that reads a field as required finds it in each of them.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import httpx2
import pydantic
import pytest
import trio
from anthropic.types import ErrorResponse, Message, RawMessageStreamEvent
from openai.types import ErrorObject
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

from retinue.providers.mock import (
    Endless,
    Fault,
    FaultKind,
    MockReply,
    MockResponse,
    MockServer,
    MockToolCall,
    ScriptedPolicy,
)

VIRTUAL_DEADLINE = 60.0
APIS = ("chat", "responses", "messages")
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
OBJECTS: dict[str, type[pydantic.BaseModel]] = {
    "chat": ChatCompletion,
    "responses": Response,
    "messages": Message,
}
LOOKUP = MockToolCall("lookup", '{"city": "Oslo"}')
REPLIES = {
    "text": MockReply(text="hello world"),
    "tools": MockReply(tool_calls=(LOOKUP, MockToolCall("get", "{}"))),
    "reasoning, text and a tool": MockReply(
        text="hi", reasoning="step by step", tool_calls=(LOOKUP,)
    ),
    "cut short": MockReply(text="a long answer", finish="length"),
}
WEB_SEARCH: dict[str, list[dict[str, Any]]] = {
    "chat": [],
    "responses": [{"type": "web_search"}],
    "messages": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
}
LOOKUP_TOOL = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def _variants(union: object) -> dict[str, type[pydantic.BaseModel]]:
    """The members of an SDK's event union, by the ``type`` each one declares."""
    while typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    found: dict[str, type[pydantic.BaseModel]] = {}
    for member in typing.get_args(union):
        for tag in typing.get_args(member.model_fields["type"].annotation):
            found[tag] = member
    return found


RESPONSES_EVENTS = _variants(ResponseStreamEvent)
MESSAGES_EVENTS = _variants(RawMessageStreamEvent)


def _tools(api: str) -> list[dict[str, Any]]:
    """A function tool and a built-in one, as *api* offers them."""
    if api == "chat":
        return [{"type": "function", "function": {"name": "lookup", "parameters": LOOKUP_TOOL}}]
    if api == "responses":
        return [{"type": "function", "name": "lookup", "parameters": LOOKUP_TOOL}, *WEB_SEARCH[api]]
    return [{"name": "lookup", "input_schema": LOOKUP_TOOL}, *WEB_SEARCH[api]]


def _request(api: str, *, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "max_tokens": 100, "stream": stream, "tools": _tools(api)}
    if api == "responses":
        body["input"] = "hi"
    else:
        body["messages"] = [{"role": "user", "content": "hi"}]
    if api == "chat" and stream:
        body["stream_options"] = {"include_usage": True}
    return body


async def _post(api: str, response: MockResponse, *, stream: bool) -> httpx2.Response:
    server = MockServer(ScriptedPolicy([response]))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with httpx2.AsyncClient(transport=server.transport()) as client:
            return await client.post(f"http://mock{PATHS[api]}", json=_request(api, stream=stream))


def _sse_payloads(body: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for line in body.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def _check_error(api: str, payload: dict[str, Any]) -> None:
    """An error body or in-stream error event, as the SDK would read it."""
    if api == "messages":
        ErrorResponse.model_validate(payload, strict=True)
    else:
        ErrorObject.model_validate(payload["error"], strict=True)


def _check_event(api: str, payload: dict[str, Any]) -> None:
    if api == "responses":
        RESPONSES_EVENTS[payload["type"]].model_validate(payload, strict=True)
    elif "error" in payload:
        _check_error(api, payload)
    elif api == "chat":
        ChatCompletionChunk.model_validate(payload, strict=True)
    elif payload["type"] != "ping":  # the SDK skips a ping before reading it as an event
        MESSAGES_EVENTS[payload["type"]].model_validate(payload, strict=True)


@pytest.mark.parametrize("reply", list(REPLIES.values()), ids=list(REPLIES))
@pytest.mark.parametrize("api", APIS)
async def test_mock_reply_bodies_validate_as_the_sdk_types(
    autojump_clock: trio.abc.Clock, api: str, reply: MockReply
) -> None:
    """A reply's JSON body validates as the SDK's response type, every required field present."""
    response = await _post(api, reply, stream=False)
    assert response.status_code == 200
    OBJECTS[api].model_validate(response.json(), strict=True)


@pytest.mark.parametrize("reply", list(REPLIES.values()), ids=list(REPLIES))
@pytest.mark.parametrize("api", APIS)
async def test_mock_stream_events_validate_as_the_sdk_types(
    autojump_clock: trio.abc.Clock, api: str, reply: MockReply
) -> None:
    """Each event of a streamed reply validates as the SDK's type for that event."""
    response = await _post(api, reply, stream=True)
    payloads = _sse_payloads(response.text)
    assert payloads
    for payload in payloads:
        _check_event(api, payload)


STATUS_FAULTS: list[FaultKind] = ["rate_limit", "server_error", "overloaded"]


@pytest.mark.parametrize("kind", STATUS_FAULTS)
@pytest.mark.parametrize("api", APIS)
async def test_mock_error_bodies_validate_as_the_sdk_types(
    autojump_clock: trio.abc.Clock, api: str, kind: FaultKind
) -> None:
    """A faulted call's error body is the SDK's error type."""
    response = await _post(api, Fault(kind), stream=False)
    assert response.status_code >= 400
    _check_error(api, response.json())


@pytest.mark.parametrize("api", APIS)
async def test_mock_stream_error_events_validate_as_the_sdk_types(
    autojump_clock: trio.abc.Clock, api: str
) -> None:
    """The events of a stream that fails midway, its error event included, are the SDK's types."""
    response = await _post(api, Fault("stream_error"), stream=True)
    payloads = _sse_payloads(response.text)
    assert payloads[-1].get("type") == "error" or "error" in payloads[-1]  # chat's has no type
    for payload in payloads:
        _check_event(api, payload)


@pytest.mark.parametrize("api", APIS)
async def test_mock_endless_stream_events_validate_as_the_sdk_types(
    autojump_clock: trio.abc.Clock, api: str
) -> None:
    """The opening events and the ticks of a stream that never ends are the SDK's types."""
    server = MockServer(ScriptedPolicy([Endless(0.5)]))
    payloads: list[dict[str, Any]] = []
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with httpx2.AsyncClient(transport=server.transport()) as client:
            with trio.move_on_after(5.2):
                body = _request(api, stream=True)
                async with client.stream("POST", f"http://mock{PATHS[api]}", json=body) as response:
                    async for line in response.aiter_lines():
                        payloads += _sse_payloads(line)
    assert len(payloads) > 10
    for payload in payloads:
        _check_event(api, payload)
