"""Every recorded exchange, replayed by the mock server through the real SDKs and adapters."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
import trio

from retinue._content import Reasoning, RedactedReasoning, Text, ToolCall
from retinue._stream import (
    BlockEnd,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from retinue.providers import (
    AuthenticationError,
    ModelNotFoundError,
    ProviderStatusError,
)
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import ReplayPolicy, open_mock_server
from retinue.providers.openai import OpenAIModel

from .support import ALL_FIXTURES, FIXTURES, Collected, collect, make_request

MELLON = ("secret_retrieval_tool", {"password": "mellon"})
RADIANCE = ("secret_retrieval_tool", {"password": "radiance"})
_MESSAGES_BODY = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}

# file -> (finish kind, usage, blocks); a block is ("text", prefix), ("reasoning", prefix,
# signed), ("redacted", count of data chars > 0), or ("call", name, arguments as parsed JSON)
SUCCESS: dict[str, tuple[str, Usage, list[tuple[Any, ...]]]] = {
    "chat_stream_text_usage.json": (
        "stop",
        Usage(16, 10, 0, None, 0),
        [("text", "4200 + 42 equals 4242.")],
    ),
    "chat_stream_one_tool_call.json": (
        "tool-calls",
        Usage(53, 15, 0, None, 0),
        [("call", "get_capital", {"country": "UK"})],
    ),
    "chat_stream_parallel_tool_calls.json": (
        "tool-calls",
        Usage(75, 53, 0, None, 0),
        [("call", *MELLON), ("call", *RADIANCE)],
    ),
    "chat_stream_after_tool_results.json": (
        "stop",
        Usage(149, 28, 0, None, 0),
        [("text", "The secrets associated with the passwords are:")],
    ),
    "chat_stream_finish_length.json": (
        "max-tokens",
        Usage(14, 50, 0, None, 0),
        [("text", "Here is a list of all 50 U.S. states:")],
    ),
    "chat_stream_finish_length_reasoning_only.json": ("max-tokens", Usage(13, 50, 0, None, 50), []),
    "chat_nonstream_parallel_tool_calls.json": (
        "tool-calls",
        Usage(75, 53, 0, None, 0),
        [("call", *MELLON), ("call", *RADIANCE)],
    ),
    "chat_nonstream_finish_length.json": (
        "max-tokens",
        Usage(14, 50, 0, None, 0),
        [("text", "Certainly! Here is a list of all 50 U.S. states:")],
    ),
    "responses_stream_parallel_function_calls.json": (
        "tool-calls",
        Usage(36, 54, 0, None, 0),
        [("call", *MELLON), ("call", *RADIANCE)],
    ),
    "responses_stream_text_after_function_outputs.json": (
        "stop",
        Usage(136, 32, 0, None, 0),
        [("text", "Here are the secrets associated with each password:")],
    ),
    "responses_stream_incomplete_max_output_tokens.json": (
        "max-tokens",
        Usage(14, 50, 0, None, 0),
        [("text", "Sure! Here is a list of all 50 U.S. states:")],
    ),
    "responses_nonstream_function_calls.json": (
        "tool-calls",
        Usage(36, 54, 0, None, 0),
        [("call", *MELLON), ("call", *RADIANCE)],
    ),
    "messages_stream_text.json": ("stop", Usage(17, 15, 0, 0), [("text", "4200 + 42 = 4242")]),
    "messages_stream_text_and_two_tool_use.json": (
        "tool-calls",
        Usage(416, 109, 0, 0),
        [
            ("text", "I'll retrieve the secrets for both passwords you provided."),
            ("call", *MELLON),
            ("call", *RADIANCE),
        ],
    ),
    "messages_stream_after_tool_results.json": (
        "stop",
        Usage(602, 52, 0, 0),
        [("text", "Here are the secrets retrieved for each password:")],
    ),
    "messages_stream_two_tool_use_no_text.json": (
        "tool-calls",
        Usage(542, 62, 0, 0),
        [("call", "pelican_name_generator", {}), ("call", "pelican_name_generator", {})],
    ),
    "messages_stream_max_tokens.json": (
        "max-tokens",
        Usage(15, 50, 0, 0),
        [("text", "Here are all 50 U.S. states in alphabetical order:")],
    ),
    "messages_stream_thinking.json": (
        "stop",
        Usage(46, 133, 0, 0),
        [
            ("reasoning", "The user wants two names for a pet pelican", True),
            ("text", "1. **Pouch**"),
        ],
    ),
    "messages_stream_thinking_then_tool_use.json": (
        "tool-calls",
        Usage(598, 92, 0, 0, 53),
        [("reasoning", "The user wants me to:", True), ("call", "fixed_version", {})],
    ),
    "messages_stream_redacted_thinking.json": (
        "stop",
        Usage(92, 189, 0, 0),
        [("redacted",), ("redacted",), ("text", "I notice that you've sent")],
    ),
    "messages_nonstream_two_tool_use.json": (
        "tool-calls",
        Usage(416, 109, 0, 0),
        [
            ("text", "I'll retrieve the secrets for both passwords you provided."),
            ("call", *MELLON),
            ("call", *RADIANCE),
        ],
    ),
    "messages_nonstream_max_tokens.json": (
        "max-tokens",
        Usage(15, 50, 0, 0),
        [("text", "Here are all 50 U.S. states in alphabetical order:")],
    ),
}

ERRORS: dict[str, tuple[type[ProviderStatusError], int, str]] = {
    "chat_stream_error_404_model_not_found.json": (ModelNotFoundError, 404, "model_not_found"),
    "chat_stream_error_401_invalid_api_key.json": (AuthenticationError, 401, "invalid_api_key"),
    "chat_error_400_unsupported_parameter.json": (
        ProviderStatusError,
        400,
        "unsupported_parameter",
    ),
    "responses_stream_error_400_model_not_found.json": (ModelNotFoundError, 400, "model_not_found"),
    "messages_stream_error_401_authentication.json": (
        AuthenticationError,
        401,
        "authentication_error",
    ),
    "messages_stream_error_404_model_not_found.json": (ModelNotFoundError, 404, "not_found_error"),
    "messages_error_400_invalid_request.json": (ProviderStatusError, 400, "invalid_request_error"),
}


def test_conformance_tables_cover_every_fixture() -> None:
    """The expectation tables name each of the 29 recorded exchanges exactly once."""
    names = {path.name for path in ALL_FIXTURES}
    assert len(names) == 29
    assert names == set(SUCCESS) | set(ERRORS)
    assert not set(SUCCESS) & set(ERRORS)


def _adapter(exchange: dict[str, Any], base_url: str) -> OpenAIModel | AnthropicModel:
    if exchange["api"] == "messages":
        return AnthropicModel(base_url=base_url, api_key="test-key")
    api: Literal["chat", "responses"] = (
        "chat" if exchange["api"] == "chat.completions" else "responses"
    )
    return OpenAIModel(base_url=base_url + "/v1", api_key="test-key", api=api)


async def _replay(name: str) -> Collected:
    path = next(p for p in ALL_FIXTURES if p.name == name)
    exchange = json.loads(path.read_text(encoding="utf-8"))
    with trio.fail_after(10):
        async with (
            open_mock_server(ReplayPolicy.of(exchange)) as server,
            _adapter(exchange, server.base_url) as model,
        ):
            return await collect(model, make_request("hello"))


def _check_block(block: object, expected: tuple[Any, ...]) -> None:
    kind = expected[0]
    if kind == "text":
        assert isinstance(block, Text)
        assert block.text.startswith(expected[1])
    elif kind == "reasoning":
        assert isinstance(block, Reasoning)
        assert block.text.startswith(expected[1])
        assert (block.signature is not None and len(block.signature) > 20) is expected[2]
    elif kind == "redacted":
        assert isinstance(block, RedactedReasoning)
        assert len(block.data) > 20
    else:
        assert isinstance(block, ToolCall)
        assert (block.name, json.loads(block.arguments)) == (expected[1], expected[2])
        assert block.id


def _check_chunk_order(collected: Collected) -> None:
    chunks = collected.chunks
    assert isinstance(chunks[-1], Finish)
    assert sum(isinstance(c, Finish) for c in chunks) == 1
    usage_at = [i for i, c in enumerate(chunks) if isinstance(c, UsageChunk)]
    assert len(usage_at) == 1
    assert usage_at[0] < len(chunks) - 1


def _check_deltas_match_ends(collected: Collected) -> None:
    """Streamed deltas add up to each block's authoritative end."""
    parts: dict[int, list[str]] = {}
    for chunk in collected.chunks:
        if isinstance(chunk, TextDelta | ReasoningDelta):
            parts.setdefault(chunk.index, []).append(chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            parts.setdefault(chunk.index, []).append(chunk.arguments_delta)
    ends = {c.index: c.block for c in collected.chunks if isinstance(c, BlockEnd)}
    assert sorted(ends) == list(range(len(ends)))
    for index, streamed in parts.items():
        block = ends[index]
        text = "".join(streamed)
        if isinstance(block, Text | Reasoning):
            assert text == block.text
        elif isinstance(block, ToolCall):
            assert (text or "{}") == block.arguments


@pytest.mark.parametrize("name", sorted(SUCCESS))
async def test_conformance_replay_yields_recorded_message(name: str) -> None:
    """A recorded success replays to the expected chunks, message, usage and finish."""
    finish, usage, blocks = SUCCESS[name]
    collected = await _replay(name)
    _check_chunk_order(collected)
    _check_deltas_match_ends(collected)
    assert collected.assembler.finish.kind == finish
    assert collected.assembler.usage == usage
    content = collected.message.content
    assert len(content) == len(blocks)
    for block, expected in zip(content, blocks, strict=True):
        _check_block(block, expected)


@pytest.mark.parametrize("name", sorted(ERRORS))
async def test_conformance_replay_raises_typed_error(name: str) -> None:
    """A recorded HTTP error raises the typed error with the provider's status and code."""
    cls, status, code = ERRORS[name]
    with pytest.raises(cls) as caught:
        await _replay(name)
    assert type(caught.value) is cls
    assert caught.value.status == status
    assert caught.value.code == code
    assert caught.value.retryable is False


async def test_conformance_replay_is_byte_for_byte() -> None:
    """The mock server returns a recorded body with exactly the recorded bytes."""
    import httpx2

    exchange = json.loads((FIXTURES / "anthropic" / "messages_stream_thinking.json").read_text())
    with trio.fail_after(10):
        async with (
            open_mock_server(ReplayPolicy.of(exchange)) as server,
            httpx2.AsyncClient() as client,
        ):
            response = await client.post(server.base_url + "/v1/messages", json=_MESSAGES_BODY)
    assert response.content == exchange["response"]["body"].encode()
    assert response.headers["content-type"] == exchange["response"]["headers"]["content-type"]
