"""The Anthropic Messages decoder against streams that break the API's block rules: a block
started twice, deltas after a block's end or of another block type than its own, deltas
without a start; and refusals with the reasons the API gives.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from retinue._content import Reasoning, RedactedReasoning, Text, ToolCall
from retinue._stream import (
    MAX_TOKENS,
    STOP,
    BlockEnd,
    Errored,
    FinishReason,
    ReasoningDelta,
    ToolCallDelta,
)
from retinue.providers import ProviderStreamError

from ._wire_edge_kit import MESSAGE_END, MESSAGE_START, typed_event
from .support import JSON, serve_once

REDACTED = {"type": "redacted_thinking", "data": "D"}


async def test_anthropic_block_started_twice_is_a_malformed_stream() -> None:
    """R10.3: a proxy reusing a closed block's index would lose the later block silently;
    the stream is refused as malformed instead.
    """
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}},
        },
    ]
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", b"".join(map(typed_event, events)))
    assert caught.value.code == "MALFORMED_RESPONSE"


@pytest.mark.parametrize(
    ("block", "late"),
    [
        ({"type": "text", "text": ""}, {"type": "text_delta", "text": " world"}),
        ({"type": "thinking", "thinking": ""}, {"type": "signature_delta", "signature": "SIG"}),
        (
            {"type": "tool_use", "id": "t1", "name": "f"},
            {"type": "input_json_delta", "partial_json": "{}"},
        ),
    ],
    ids=["text", "signature", "tool-arguments"],
)
async def test_anthropic_delta_after_its_block_ended_is_a_malformed_stream(
    block: dict[str, Any], late: dict[str, Any]
) -> None:
    """R10.3, R10.6: a block's end goes out with its content so far, so a delta after it
    would be lost; the stream is refused as malformed, not cut short silently."""
    early = {"text": "hello", "thinking": "hmm", "tool_use": '{"a":'}[block["type"]]
    first = {
        "text": {"type": "text_delta", "text": early},
        "thinking": {"type": "thinking_delta", "thinking": early},
        "tool_use": {"type": "input_json_delta", "partial_json": early},
    }[block["type"]]
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": first},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_delta", "index": 0, "delta": late},
        *MESSAGE_END,
    ]
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", b"".join(map(typed_event, events)))
    assert (caught.value.code, caught.value.retryable) == ("MALFORMED_RESPONSE", True)
    assert str(caught.value).startswith("anthropic stream, event ")
    assert str(caught.value).endswith(": content for block 0 came after the block ended")


@pytest.mark.parametrize(
    ("block", "delta", "started"),
    [
        ({"type": "text", "text": ""}, {"type": "thinking_delta", "thinking": "hmm"}, "text"),
        (
            {"type": "text", "text": ""},
            {"type": "input_json_delta", "partial_json": '{"city":"Oslo"}'},
            "text",
        ),
        (
            {"type": "thinking", "thinking": "", "signature": ""},
            {"type": "text_delta", "text": "Hi."},
            "thinking",
        ),
        (
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}},
            {"type": "signature_delta", "signature": "SIG"},
            "tool_use",
        ),
    ],
    ids=["thinking-into-text", "arguments-into-text", "text-into-thinking", "signature-into-call"],
)
async def test_anthropic_delta_of_another_block_type_is_a_malformed_stream(
    block: dict[str, Any], delta: dict[str, Any], started: str
) -> None:
    """R10.1, R10.3: a delta that does not fit the block it names would make content of
    the wrong kind (thinking shown as the answer, a tool call no model made, run by the
    agent) or a stream the loop cannot assemble; it is refused as malformed, retryable."""
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        *MESSAGE_END,
    ]
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", b"".join(map(typed_event, events)))
    assert (caught.value.code, caught.value.retryable) == ("MALFORMED_RESPONSE", True)
    assert str(caught.value).endswith(f"{delta['type']} for block 0, which is a {started} block")


@pytest.mark.parametrize(
    "delta",
    [
        {"type": "signature_delta", "signature": "SIG"},
        {"type": "thinking_delta", "thinking": "hmm"},
        {"type": "text_delta", "text": "Hi."},
    ],
    ids=["signature", "thinking", "text"],
)
async def test_anthropic_delta_for_a_redacted_thinking_block_is_left_out(
    delta: dict[str, Any],
) -> None:
    """R10.6: a redacted thinking block is sent whole in its start: a delta naming it
    adds nothing and the stream goes on, as the SDK reads it, not refused as malformed."""
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": REDACTED},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "Hi."},
        },
        *MESSAGE_END,
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.message.content == (RedactedReasoning("D"), Text("Hi."))
    assert [type(c) for c in collected.chunks if getattr(c, "index", None) == 0] == [BlockEnd]


async def test_anthropic_deltas_without_a_start_keep_to_their_first_block_type() -> None:
    """R10.6: a delta without a start opens its block; a later delta of another type for
    that index is refused as malformed, not mixed into it."""
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "A"}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "b"},
        },
        *MESSAGE_END,
    ]
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", b"".join(map(typed_event, events)))
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert str(caught.value).endswith("thinking_delta for block 0, which is a text block")


async def test_anthropic_deltas_without_a_start_still_make_their_block() -> None:
    """R10.6: delta-only streams are allowed: the first delta's type makes the block."""
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "A"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "b"}},
        *MESSAGE_END,
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.message.content == (Text("Ab"),)


OSLO_CALL = {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"city": "Oslo"}}


@pytest.mark.parametrize(
    "deltas",
    [['{"city":"Oslo"}'], ['{"city":', '"Bergen"}']],
    ids=["the-same-input", "another-input"],
)
async def test_anthropic_deltas_after_a_start_carrying_input_replace_that_input(
    deltas: list[str],
) -> None:
    """R9.6, R10.6: a call whose start carries its input and whose deltas stream it again
    gets the deltas' input, as the SDK reads it, not both run together into no JSON."""
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": OSLO_CALL},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": part},
            }
            for part in deltas
        ),
        {"type": "content_block_stop", "index": 0},
        *MESSAGE_END,
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.message.content == (ToolCall("t1", "lookup", "".join(deltas)),)


EMPTY_INPUT_DELTA = {"type": "input_json_delta", "partial_json": ""}


@pytest.mark.parametrize("stopped", [True, False], ids=["block-stopped", "never-stopped"])
async def test_anthropic_start_carrying_the_whole_input_keeps_it(*, stopped: bool) -> None:
    """R10.6: a call sent whole in its start, with no deltas but an empty one (the API
    opens each call's input so), keeps its input, whether or not its block is stopped
    before the message ends."""
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": OSLO_CALL},
        {"type": "content_block_delta", "index": 0, "delta": EMPTY_INPUT_DELTA},
        *([{"type": "content_block_stop", "index": 0}] if stopped else []),
        *MESSAGE_END,
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.message.content == (ToolCall("t1", "lookup", '{"city":"Oslo"}'),)
    deltas = [c for c in collected.chunks if isinstance(c, ToolCallDelta)]
    assert "".join(c.arguments_delta for c in deltas) == '{"city":"Oslo"}'


THOUGHT = {"type": "thinking_delta", "thinking": "Oslo first."}


@pytest.mark.parametrize(
    ("start", "later"),
    [
        ("SIG-A", ["SIG-B"]),
        ("SIG-A", ["SIG-A"]),
        ("SIG-A", []),
        ("", ["SIG-B"]),
        ("", ["SIG-A", "SIG-B"]),
    ],
    ids=["replaced", "repeated", "start-only", "delta-only", "two-deltas"],
)
async def test_anthropic_signature_delta_replaces_the_signature_a_start_carried(
    start: str, later: list[str]
) -> None:
    """R5.2, R10.6: a thinking block whose start carries a signature and whose
    ``signature_delta`` sends one again is signed by the delta, and of two deltas by the
    newest, as the SDK reads them, never two run together, a signature the API refuses on
    every later request."""
    thinking = {"type": "thinking", "thinking": "", "signature": start}
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": thinking},
        {"type": "content_block_delta", "index": 0, "delta": THOUGHT},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": sig},
            }
            for sig in later
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "Hi."},
        },
        *MESSAGE_END,
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    signature = later[-1] if later else start
    assert collected.message.content == (Reasoning("Oslo first.", signature), Text("Hi."))
    signed = [c.signature for c in collected.chunks if isinstance(c, ReasoningDelta)]
    assert [s for s in signed if s is not None] == [signature]


REFUSAL_DETAILS = {
    "type": "refusal",
    "category": "cyber",
    "explanation": "The request asks for a working exploit.",
}


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_anthropic_refusal_says_why_as_its_stop_details_do(*, streamed: bool) -> None:
    """R10.3, R10.4: a refusal finishes as an error that gives the policy category and the
    explanation the API sent with it, not only that the model refused."""
    if streamed:
        events: list[dict[str, Any]] = [
            MESSAGE_START,
            {
                "type": "message_delta",
                "delta": {"stop_reason": "refusal", "stop_details": REFUSAL_DETAILS},
                "usage": {"output_tokens": 1},
            },
            {"type": "message_stop"},
        ]
        collected = await serve_once("messages", b"".join(map(typed_event, events)))
    else:
        message = {
            "type": "message",
            "role": "assistant",
            "content": [],
            "stop_reason": "refusal",
            "stop_details": REFUSAL_DETAILS,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        collected = await serve_once("messages", json.dumps(message).encode(), JSON)
    assert collected.assembler.finish == Errored(
        "the model refused to answer (cyber): The request asks for a working exploit.",
        code="refusal",
    )


async def test_anthropic_refusal_without_details_says_the_model_refused() -> None:
    """R10.4: a refusal whose ``stop_details`` are absent or ``null`` still says what happened."""
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_details": None}},
        {"type": "message_stop"},
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.assembler.finish == Errored("the model refused to answer", code="refusal")


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", STOP),
        ("stop_sequence", STOP),
        ("max_tokens", MAX_TOKENS),
        ("model_context_window_exceeded", MAX_TOKENS),
    ],
    ids=["end_turn", "stop_sequence", "max_tokens", "model_context_window_exceeded"],
)
@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_anthropic_stop_reasons_finish_as_what_they_mean(
    *, stop_reason: str, expected: FinishReason, streamed: bool
) -> None:
    """R10.4, R7.38: a stop at a stop sequence is a ``stop``; an answer cut at the token
    limit or at the end of the context window is ``max-tokens`` (its calls are dropped),
    neither an unknown kind named after the API's reason, which would pass as a success."""
    if streamed:
        events: list[dict[str, Any]] = [
            MESSAGE_START,
            {"type": "message_delta", "delta": {"stop_reason": stop_reason}},
            {"type": "message_stop"},
        ]
        collected = await serve_once("messages", b"".join(map(typed_event, events)))
    else:
        message = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "Partly"}],
            "stop_reason": stop_reason,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        collected = await serve_once("messages", json.dumps(message).encode(), JSON)
    assert collected.assembler.finish == expected
