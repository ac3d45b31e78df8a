"""Fields the APIs define reach the wire and come back from it: Anthropic stop sequences,
OpenAI cache writes, and a mock chat completion's reasoning whether streamed or not.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
import trio

from retinue._content import Reasoning, Text
from retinue._stream import Usage, UsageChunk
from retinue.providers import ProviderError
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockReply, MockServer, ScriptedPolicy

from .support import JSON, SSE, collect, make_request, mock_adapter, serve_once, sse_body

# --- Anthropic stop sequences ----------------------------------------------------------


@pytest.mark.parametrize("blank", [" ", "\n", "\n\n", "\t \r\n", "\u3000"])
async def test_anthropic_refuses_a_blank_stop_sequence_before_sending(blank: str) -> None:
    """The API refuses a whole request with a stop sequence that is only whitespace (an
    empty one the config refuses); the adapter refuses it first, naming it, rather than
    drop it and let the answer stop elsewhere than asked.
    """
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with AnthropicModel(transport=server.transport(), api_key="k") as model:
            with pytest.raises(ProviderError) as caught:
                await collect(model, make_request("hi", stop=["END", blank]))
    assert (caught.value.code, caught.value.retryable) == ("INVALID_REQUEST", False)
    assert repr(blank) in str(caught.value)
    assert "Anthropic Messages API" in str(caught.value)
    assert not server.calls


async def test_anthropic_sends_stop_sequences_with_text_verbatim() -> None:
    """A stop sequence with a visible character goes out whole, its whitespace kept."""
    server = MockServer(EchoPolicy())
    stop = ["\n\nHuman:", " END ", "\tx"]
    with trio.fail_after(5):
        async with AnthropicModel(transport=server.transport(), api_key="k") as model:
            await collect(model, make_request("hi", stop=stop))
    assert server.calls[0].body["stop_sequences"] == stop


# --- OpenAI cache writes ---------------------------------------------------------------

# (prompt tokens, cached, written) -> the Usage's (input, cache read, cache write)
CACHE_CASES = [
    ((1000, 100, 800), (100, 100, 800)),
    ((1000, 0, 1000), (0, 0, 1000)),
    ((500, 300, 400), (0, 300, 400)),  # a server's counts that overlap: never negative
]


def _chat_usage(prompt: int, cached: int, written: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": 5,
        "total_tokens": prompt + 5,
        "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
    }


def _chat_stream(usage: dict[str, Any]) -> bytes:
    delta = {"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}
    return sse_body(
        json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [delta]}).encode(),
        json.dumps(
            {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": usage}
        ).encode(),
        b"[DONE]",
    )


def _chat_json(usage: dict[str, Any]) -> bytes:
    message = {"role": "assistant", "content": "hi"}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return json.dumps(
        {"id": "c", "object": "chat.completion", "choices": [choice], "usage": usage}
    ).encode()


def _responses_stream(prompt: int, cached: int, written: int) -> bytes:
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + 5,
    }
    item = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi"}],
    }
    response = {"id": "r", "status": "completed", "output": [item], "usage": usage}
    return sse_body(json.dumps({"type": "response.completed", "response": response}).encode())


def _usage(chunks: list[Any]) -> Usage:
    [usage] = [chunk.usage for chunk in chunks if isinstance(chunk, UsageChunk)]
    return usage


@pytest.mark.parametrize(("counts", "expected"), CACHE_CASES)
@pytest.mark.parametrize("form", ["chat-stream", "chat-json", "responses"])
async def test_openai_cache_writes_are_counted_apart_from_input(
    form: str, counts: tuple[int, int, int], expected: tuple[int, int, int]
) -> None:
    """R10.5: ``cache_write_tokens`` (Chat's ``prompt_tokens_details``, Responses'
    ``input_tokens_details``) becomes the Usage's cache writes, and the input excludes
    both the tokens read from the cache and those written to it, never below 0.
    """
    if form == "chat-stream":
        got = await serve_once("chat", _chat_stream(_chat_usage(*counts)))
    elif form == "chat-json":
        got = await serve_once("chat", _chat_json(_chat_usage(*counts)), JSON)
    else:
        got = await serve_once("responses", _responses_stream(*counts), SSE)
    usage = _usage(got.chunks)
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == expected
    assert usage.output_tokens == 5


@pytest.mark.parametrize("form", ["chat-stream", "chat-json"])
async def test_chat_cache_hits_counted_at_the_top_of_usage_are_cache_reads(form: str) -> None:
    """R10.5: a server that counts its cache hits as ``prompt_cache_hit_tokens`` beside the
    prompt tokens (DeepSeek's) has them read as cache reads, taken out of the input."""
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "prompt_cache_hit_tokens": 60,
        "prompt_cache_miss_tokens": 40,
    }
    body, headers = (
        (_chat_stream(usage), SSE) if form == "chat-stream" else (_chat_json(usage), JSON)
    )
    got = await serve_once("chat", body, headers)
    assert _usage(got.chunks) == Usage(40, 5, cache_read_tokens=60)


@pytest.mark.parametrize("form", ["chat-stream", "chat-json"])
async def test_chat_counts_that_are_no_whole_number_are_not_truncated(form: str) -> None:
    """R10.5: a count that is no whole number (``2.5``) is no count: none of the input is
    read from the cache and the reasoning tokens are unknown, rather than either being a
    guess truncated from it and taken out of the input."""
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 2.5},
        "completion_tokens_details": {"reasoning_tokens": 1.5},
    }
    body, headers = (
        (_chat_stream(usage), SSE) if form == "chat-stream" else (_chat_json(usage), JSON)
    )
    got = await serve_once("chat", body, headers)
    assert _usage(got.chunks) == Usage(10, 5, cache_read_tokens=0)


async def test_openai_usage_without_cache_writes_reports_none() -> None:
    """A server that does not report cache writes leaves the count unknown, not 0."""
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {}}
    got = await serve_once("chat", _chat_stream(usage))
    assert _usage(got.chunks) == Usage(10, 5)


# --- Mock chat completions: reasoning ----------------------------------------------------


async def test_mock_chat_completion_carries_reasoning_streamed_or_not() -> None:
    """A non-streamed completion holds, read by the official SDK, the same
    ``reasoning_content`` as the adapter reads from the streamed deltas of the same reply.
    """
    reply = MockReply(text="answer", reasoning="let me think it over")
    server = MockServer(ScriptedPolicy([reply], cycle=True))
    messages: Any = [{"role": "user", "content": "hi"}]
    with trio.fail_after(5):
        async with mock_adapter("chat", server) as model:
            streamed = await collect(model, make_request("hi"))
        async with (
            httpx2.AsyncClient(transport=server.transport()) as http,
            openai.AsyncOpenAI(
                base_url="http://mock/v1", api_key="k", max_retries=0, http_client=http
            ) as client,
        ):
            done = await client.chat.completions.create(model="m", messages=messages)
    assert streamed.message.content == (Reasoning(reply.reasoning), Text("answer"))
    message = done.choices[0].message
    assert (message.content, getattr(message, "reasoning_content", None)) == (
        "answer",
        reply.reasoning,
    )
