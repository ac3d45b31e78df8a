"""An error a provider reports inside its stream says whose stream it was and at which event,
as data that cannot be read there does."""

from __future__ import annotations

import json

import pytest
import trio

from retinue.providers import ProviderStreamError
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel

from .support import JSON, SSE, collect, make_request, sse_body

TEXT = b'{"choices":[{"index":0,"delta":{"content":"hi"}}]}'
CHAT = sse_body(TEXT, TEXT, b'{"error":{"message":"upstream died","code":502}}')
RESPONSES = (
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
    b'"output_index":0,"content_index":0,"delta":"hi"}\n\n'
    b'event: error\ndata: {"type":"error","code":"server_error","message":"upstream died"}\n\n'
)
MESSAGES = (
    b'event: message_start\ndata: {"type":"message_start","message":{"usage":{}}}\n\n'
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
    b'"message":"upstream died"}}\n\n'
)


def _adapter(api: str, server: MockServer) -> OpenAIModel | AnthropicModel:
    if api == "messages":
        return AnthropicModel(
            base_url="http://mock", api_key="k", provider="acme", transport=server.transport()
        )
    return OpenAIModel(
        base_url="http://mock/v1",
        api_key="k",
        api=api,  # type: ignore[arg-type]
        provider="acme",
        transport=server.transport(),
    )


async def _failure(api: str, body: bytes, headers: object = SSE) -> ProviderStreamError:
    server = MockServer(ScriptedPolicy([RawReply(200, headers, body)]))  # type: ignore[arg-type]
    with trio.fail_after(5):
        async with _adapter(api, server) as model:
            try:
                await collect(model, make_request("hi"))
            except ProviderStreamError as error:
                return error
    raise AssertionError("the stream did not fail")


@pytest.mark.parametrize(
    ("api", "body", "event", "code", "status"),
    [
        ("chat", CHAT, 3, "502", 502),
        ("responses", RESPONSES, 2, "server_error", None),
        ("messages", MESSAGES, 2, "overloaded_error", None),
    ],
    ids=["chat", "responses", "messages"],
)
async def test_an_error_event_names_its_provider_and_its_event(
    api: str, body: bytes, event: int, code: str, status: int | None
) -> None:
    """R10.3: an error event fails the stream naming the adapter's provider and the event
    it came as, keeping its code, status and retry verdict, where it named only the
    API (every OpenAI-compatible adapter of a runtime reads "chat completions")."""
    error = await _failure(api, body)
    assert str(error).startswith(f"acme stream, event {event}: ")
    assert str(error).endswith("upstream died")
    assert (error.code, error.status, error.retryable) == (code, status, True)


async def test_an_error_object_for_a_whole_body_names_its_provider() -> None:
    """R10.3: an error object sent as a whole body with status 200 (some proxies send one)
    names the adapter's provider and the body, as a malformed body does."""
    body = json.dumps({"error": {"message": "upstream died", "code": 503}}).encode()
    error = await _failure("chat", body, JSON)
    assert str(error).startswith("acme response body: ")
    assert (error.code, error.status, error.retryable) == ("503", 503, True)
