"""OpenAI's own API always sends the usage a stream asks for: its first stream of a model
cut after the finish reason is truncated, not complete without usage."""

from __future__ import annotations

import pytest
import trio

from retinue._content import Text
from retinue._stream import Usage
from retinue.providers import ProviderConnectionError
from retinue.providers.mock import MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel

from .support import SSE, Collected, collect, make_request, sse_body

ANSWER = b'{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}'
USAGE = b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}'


async def _first_stream(base_url: str, body: bytes) -> Collected:
    server = MockServer(ScriptedPolicy([RawReply(200, SSE, body)]))
    with trio.fail_after(5):
        async with OpenAIModel(
            base_url=base_url, api_key="k", transport=server.transport()
        ) as model:
            return await collect(model, make_request("hi"))


@pytest.mark.parametrize("base_url", ["https://api.openai.com/v1", "https://eu.api.openai.com/v1"])
async def test_openais_first_stream_cut_before_its_usage_is_truncated(base_url: str) -> None:
    """R10.2, R10.5: the first stream of a model from OpenAI's own API that ends after its
    finish reason, without the usage it always sends or ``[DONE]``, was cut: it fails
    ``STREAM_TRUNCATED`` (retryable), where it passed as a whole answer whose usage,
    and the token budget it corrects, was lost."""
    with pytest.raises(ProviderConnectionError) as caught:
        await _first_stream(base_url, sse_body(ANSWER))
    assert caught.value.code == "STREAM_TRUNCATED"
    assert caught.value.retryable


async def test_openais_whole_stream_still_streams() -> None:
    """R10.5: a whole stream from OpenAI's own API keeps its answer and usage."""
    collected = await _first_stream("https://api.openai.com/v1", sse_body(ANSWER, USAGE, b"[DONE]"))
    assert collected.message.content == (Text("hi"),)
    assert collected.assembler.usage == Usage(5, 3)
