"""Deltas of a block that arrive after a later block opened carry their own block's index.

A consumer of the stream (the assembler, a UI) places each delta by its index: one
carrying the index of the block opened last would put an answer's text inside a
tool call, or one call's arguments inside another's. Each body is served verbatim by
the in-process mock server, so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
from typing import Any

from retinue._content import Text, ToolCall
from retinue._stream import TextDelta, ToolCallDelta

from ._wire_edge_kit import responses_body
from .support import serve_once, sse_body


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode()


async def test_chat_text_after_a_call_opened_goes_to_the_text_block() -> None:
    """R10.1, R10.6: text a server sends after a tool call opened is the answer's text, at
    the text block's index, not at the call's."""
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup"}}
    body = sse_body(
        _chat_chunk({"role": "assistant", "content": "Checking "}),
        _chat_chunk({"tool_calls": [call]}),
        _chat_chunk({"content": "Oslo."}),
        _chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Oslo"}'}}]}),
        _chat_chunk({}, "tool_calls"),
        b"[DONE]",
    )
    collected = await serve_once("chat", body)
    texts = [(c.index, c.text) for c in collected.chunks if isinstance(c, TextDelta)]
    assert texts == [(0, "Checking "), (0, "Oslo.")]
    calls = [c.index for c in collected.chunks if isinstance(c, ToolCallDelta)]
    assert calls == [1, 1]
    assert collected.message.content == (
        Text("Checking Oslo."),
        ToolCall("call_1", "lookup", '{"city":"Oslo"}'),
    )


def _call_item(number: int, arguments: str = "") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{number}",
        "call_id": f"call_{number}",
        "name": "lookup",
        "arguments": arguments,
    }


def _arguments(output: int, delta: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.delta",
        "output_index": output,
        "item_id": f"fc_{output}",
        "delta": delta,
    }


async def test_responses_arguments_of_calls_streamed_together_go_to_their_own_call() -> None:
    """R10.1, R10.6: two calls added before their arguments stream, each call's argument
    deltas interleaved with the other's, carry their own call's index."""
    whole = ['{"city":"Oslo"}', '{"city":"Rome"}']
    done = [_call_item(number, whole[number]) for number in (0, 1)]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": _call_item(0)},
        {"type": "response.output_item.added", "output_index": 1, "item": _call_item(1)},
        _arguments(0, '{"city":'),
        _arguments(1, '{"city":'),
        _arguments(0, '"Oslo"}'),
        _arguments(1, '"Rome"}'),
        {"type": "response.output_item.done", "output_index": 0, "item": done[0]},
        {"type": "response.output_item.done", "output_index": 1, "item": done[1]},
        {
            "type": "response.completed",
            "response": {"id": "r", "status": "completed", "output": done},
        },
    ]
    collected = await serve_once("responses", responses_body(events))
    deltas = [
        (c.index, c.arguments_delta)
        for c in collected.chunks
        if isinstance(c, ToolCallDelta) and c.arguments_delta
    ]
    assert deltas == [(0, '{"city":'), (1, '{"city":'), (0, '"Oslo"}'), (1, '"Rome"}')]
    assert collected.message.content == (
        ToolCall("call_0", "lookup", whole[0]),
        ToolCall("call_1", "lookup", whole[1]),
    )
