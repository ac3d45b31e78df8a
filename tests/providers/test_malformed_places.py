"""Malformed data in a response says which adapter read it and where in the response it was."""

from __future__ import annotations

import pytest
import trio

from retinue.providers import ProviderStreamError
from retinue.providers.mock import MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel

from .support import JSON, SSE, collect, make_request, serve_once, sse_body

CHAT_TEXT = b'{"choices":[{"index":0,"delta":{"content":"hi"}}]}'


@pytest.mark.parametrize(
    ("api", "provider"), [("chat", "openai"), ("responses", "openai"), ("messages", "anthropic")]
)
async def test_an_event_that_is_no_json_object_names_the_provider_and_the_event(
    api: str, provider: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: the third event of a stream, ``{bad``, fails as malformed data of that
    provider's stream at event 3, not only that "the stream" carried it."""
    body = sse_body(b'{"type":"ping"}', b'{"type":"ping"}', b"{bad")
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, body, SSE)
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert str(caught.value) == (
        f"{provider} stream, event 3: data that is not a JSON object: b'{{bad'"
    )


async def test_a_decoder_refusal_names_the_adapter_that_read_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: an OpenAI-compatible adapter's refusal of an event (arguments of a type no
    call has) names its own provider and the event, among the adapters of a runtime."""
    call = b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a",'
    call += b'"function":{"name":"f","arguments":[1]}}]}}]}'
    server = MockServer(ScriptedPolicy([RawReply(200, SSE, sse_body(CHAT_TEXT, call))]))
    with trio.fail_after(60):
        async with OpenAIModel(
            base_url="http://mock/v1",
            api_key="k",
            provider="deepseek",
            transport=server.transport(),
        ) as model:
            with pytest.raises(ProviderStreamError) as caught:
                await collect(model, make_request("hi"))
    assert str(caught.value).startswith("deepseek stream, event 2: chat completions: ")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_whole_body_that_is_no_json_object_says_it_was_the_body(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: a JSON response body that is a list is malformed data of the response body."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, b"[1, 2]", JSON)
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert " response body: data that is not a JSON object: b'[1, 2]'" in str(caught.value)
