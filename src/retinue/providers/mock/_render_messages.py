"""Render mock replies as Anthropic Messages: a message object or stream events."""

from __future__ import annotations

import functools
import json

from ._render_shared import (
    JsonObject,
    call_id,
    dumps,
    reply_tag,
    split_text,
    sse_event,
    usage_counts,
)
from ._values import MockCall, MockReply

__all__ = ["anthropic_message", "anthropic_stream", "anthropic_text_delta"]


_PING = sse_event({"type": "ping"}, "ping")

_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _is_json(arguments: str) -> bool:
    try:
        json.loads(arguments or "{}")
    except ValueError:
        return False
    return True


def _raw_arguments(reply: MockReply, blocks: int) -> list[str | None]:
    """Per block, a tool call's arguments when they are not JSON, else ``None``.

    Scripts give such arguments to test how clients handle them; a stream can
    carry them as partial JSON, where a ``tool_use`` object cannot.
    """
    raw = [None if _is_json(t.arguments) else t.arguments for t in reply.tool_calls]
    return [None] * (blocks - len(raw)) + raw


def _anthropic_blocks(call: MockCall, reply: MockReply) -> list[JsonObject]:
    blocks: list[JsonObject] = []
    if reply.reasoning:
        blocks.append(
            {
                "type": "thinking",
                "thinking": reply.reasoning,
                "signature": f"sig-mock{reply_tag(call)}",
            }
        )
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for index, tool in enumerate(reply.tool_calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": call_id(call, index, tool.id, "toolu"),
                "name": tool.name,
                "input": json.loads(tool.arguments or "{}") if _is_json(tool.arguments) else {},
            }
        )
    return blocks


def anthropic_message(call: MockCall, reply: MockReply) -> JsonObject:
    prompt, completion = usage_counts(call, reply)
    return {
        "id": f"msg_mock{reply_tag(call)}",
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": _anthropic_blocks(call, reply),
        "stop_reason": _STOP_REASONS.get(reply.finish_name, reply.finish_name),
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": completion,
        },
    }


def _block_event(index: int, kind: str, **fields: object) -> bytes:
    return sse_event({"type": kind, "index": index, **fields}, kind)


def anthropic_text_delta(index: int, piece: str) -> bytes:
    """The event carrying *piece* of the text of content block *index*."""
    return _block_event(index, "content_block_delta", delta=_text_delta(piece))


def _text_delta(piece: str) -> JsonObject:
    return {"type": "text_delta", "text": piece}


def _anthropic_block_events(
    index: int, block: JsonObject, chunks: int, raw_arguments: str | None = None
) -> list[bytes]:
    event = functools.partial(_block_event, index)
    kind = block["type"]
    start: JsonObject
    deltas: list[JsonObject]
    if kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": p} for p in split_text(str(block["thinking"]), 3)
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [_text_delta(p) for p in split_text(str(block["text"]), chunks)]
    else:
        start = {**block, "input": {}}
        arguments = dumps(block["input"]) if raw_arguments is None else raw_arguments
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in split_text(arguments, 3)]
    events = [event("content_block_start", content_block=start)]
    events += [event("content_block_delta", delta=delta) for delta in deltas]
    events.append(event("content_block_stop"))
    return events


def anthropic_stream(call: MockCall, reply: MockReply) -> list[bytes]:
    final = anthropic_message(call, reply)
    usage = final["usage"]
    assert isinstance(usage, dict)
    # The message as it starts, from the final one: the usage is estimated once per call.
    started = {
        **final,
        "content": [],
        "stop_reason": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events = [sse_event({"type": "message_start", "message": started}, "message_start")]
    blocks = final["content"]
    assert isinstance(blocks, list)
    raw = _raw_arguments(reply, len(blocks))
    for index, block in enumerate(blocks):
        events += _anthropic_block_events(index, block, reply.chunks, raw[index])
    # The API pings once a stream has begun, after its first block starts (or the
    # message, with no block), as every recorded stream shows: a client must skip it.
    events.insert(2 if blocks else 1, _PING)
    delta = {"stop_reason": final["stop_reason"], "stop_sequence": None}
    events.append(
        sse_event(
            {"type": "message_delta", "delta": delta, "usage": final["usage"]}, "message_delta"
        )
    )
    events.append(sse_event({"type": "message_stop"}, "message_stop"))
    return events
