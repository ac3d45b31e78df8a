"""Responses items and Anthropic content blocks as compatible servers send them: function
calls without ``call_id`` or arguments, reasoning summary parts, usage counts left null, and
thinking with or without its signature.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from retinue._content import Reasoning, Text, ToolCall
from retinue._stream import Usage

from ._wire_edge_kit import MESSAGE_END, MESSAGE_START, typed_event
from .support import JSON, SSE, recorded_events, serve_once


async def test_anthropic_null_counts_in_message_delta_keep_the_start_counts() -> None:
    """R10.5: ``message_delta`` usage fields are optional; a ``null`` keeps the known count."""
    start_usage = {
        "input_tokens": 17,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 2000,
        "output_tokens": 1,
    }
    end_usage = {
        "input_tokens": None,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "output_tokens": 15,
    }
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": start_usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": end_usage},
        {"type": "message_stop"},
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.assembler.usage == Usage(17, 15, 2000, 100)


async def test_anthropic_thinking_sent_whole_in_its_start_keeps_its_signature() -> None:
    """R10.2: a thinking block whose start carries its text and signature is signed
    reasoning, as the same block in a whole response is, its signature kept."""
    thinking = {"type": "thinking", "thinking": "all at once", "signature": "SIG"}
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": thinking},
        {"type": "content_block_stop", "index": 0},
        *MESSAGE_END,
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.message.content == (Reasoning("all at once", "SIG"),)


def _unsigned_thinking_body(thinking: dict[str, Any]) -> bytes:
    message = {
        "type": "message",
        "role": "assistant",
        "content": [thinking, {"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return json.dumps(message).encode()


def _unsigned_thinking_stream() -> bytes:
    thinking = {"type": "thinking", "thinking": "", "signature": ""}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": thinking},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hmm"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": ""},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "hi"},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    return b"".join(map(typed_event, events))


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (_unsigned_thinking_body({"type": "thinking", "thinking": "hmm"}), JSON),
        (_unsigned_thinking_body({"type": "thinking", "thinking": "hmm", "signature": ""}), JSON),
        (_unsigned_thinking_stream(), SSE),
    ],
    ids=["whole-without-signature", "whole-empty-signature", "streamed-empty-signature"],
)
async def test_anthropic_thinking_without_a_signature_is_unsigned(
    body: bytes, headers: Any
) -> None:
    """Thinking from a server that does not sign it (an Anthropic-compatible endpoint) is
    unsigned reasoning, streamed or whole: an empty signature would be replayed, and refused.
    """
    collected = await serve_once("messages", body, headers)
    assert collected.message.content == (Reasoning("hmm", None), Text("hi"))


async def test_responses_reasoning_summary_parts_are_separate_paragraphs() -> None:
    """R10.2: each summary part of a reasoning item is its own paragraph, not run together."""
    summary = "response.reasoning_summary_text.delta"
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning"}},
        {"type": summary, "output_index": 0, "summary_index": 0, "delta": "Plan the "},
        {"type": summary, "output_index": 0, "summary_index": 0, "delta": "answer."},
        {"type": summary, "output_index": 0, "summary_index": 1, "delta": "Check it."},
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (Reasoning("Plan the answer.\n\nCheck it."),)


async def test_responses_whole_body_reasoning_summary_parts_are_separate_paragraphs() -> None:
    """R10.2: a non-streamed reasoning item's summary parts are joined as paragraphs too."""
    parts = [{"type": "summary_text", "text": "Plan."}, {"type": "summary_text", "text": "Check."}]
    body = {"status": "completed", "output": [{"type": "reasoning", "summary": parts}]}
    collected = await serve_once("responses", json.dumps(body).encode(), JSON)
    assert collected.message.content == (Reasoning("Plan.\n\nCheck."),)


FUNCTION_CALL_WITHOUT_CALL_ID = {"type": "function_call", "name": "lookup", "arguments": "{}"}


async def test_responses_streamed_function_call_without_call_id_keeps_its_minted_id() -> None:
    """R10.2: a function call sent without ``call_id`` ends with the id its first delta
    carried, not an empty one (a transcript with an empty id is refused later).
    """
    added = {**FUNCTION_CALL_WITHOUT_CALL_ID, "arguments": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": FUNCTION_CALL_WITHOUT_CALL_ID,
        },
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    (call,) = collected.message.content
    assert isinstance(call, ToolCall)
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    assert call.id == getattr(collected.chunks[0], "id", None)
    assert (call.name, call.arguments) == ("lookup", "{}")


_NO_ARGUMENTS_CALL = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "now"}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_responses_function_call_with_empty_arguments_has_an_empty_object(
    *, streamed: bool
) -> None:
    """R10.2: a completed call whose ``arguments`` are ``""`` (a tool without parameters,
    from some servers) has the JSON text ``{}`` as its arguments, as a Chat Completions or
    Anthropic call with none has, not logged with ``""``, which is no JSON."""
    item = {**_NO_ARGUMENTS_CALL, "arguments": ""}
    response = {"object": "response", "status": "completed", "output": [item]}
    if streamed:
        events: list[dict[str, Any]] = [
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response},
        ]
        collected = await serve_once("responses", b"".join(map(typed_event, events)))
    else:
        collected = await serve_once("responses", json.dumps(response).encode(), JSON)
    assert collected.message.content == (ToolCall("c1", "now", "{}"),)


async def test_responses_whole_body_function_call_without_call_id_gets_an_id() -> None:
    """R10.2: a non-streamed function call without ``call_id`` gets a fresh id too."""
    body = {"status": "completed", "output": [FUNCTION_CALL_WITHOUT_CALL_ID]}
    collected = await serve_once("responses", json.dumps(body).encode(), JSON)
    (call,) = collected.message.content
    assert isinstance(call, ToolCall)
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("responses_stream_parallel_function_calls.json", "response.function_call_arguments.delta"),
        ("responses_stream_text_after_function_outputs.json", "response.output_text.delta"),
    ],
    ids=["call arguments", "text"],
)
async def test_responses_deltas_without_an_output_index_go_to_the_item_they_name(
    name: str, kind: str
) -> None:
    """R10.6: deltas without ``output_index`` whose ``item_id`` names an item added with
    one go to that item's block, as the recorded stream (where they have one) goes. Call
    arguments open no call of their own, of no name, holding both calls' arguments run
    together, which the agent would run beside the two."""
    recorded = recorded_events(name)
    edited = [
        {k: v for k, v in e.items() if k != "output_index"} if e["type"] == kind else e
        for e in recorded
    ]
    expected = await serve_once("responses", b"".join(map(typed_event, recorded)))
    collected = await serve_once("responses", b"".join(map(typed_event, edited)))
    assert collected.message.content == expected.message.content
    assert len(collected.message.content) == (2 if "calls" in name else 1)
