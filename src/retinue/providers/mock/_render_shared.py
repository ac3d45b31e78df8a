"""What every mock wire format shares: JSON and SSE encoding, reply ids and usage counts."""

from __future__ import annotations

import json

from ._values import MockCall, MockReply

__all__ = ["JsonObject", "call_id", "dumps", "reply_tag", "split_text", "sse_event", "usage_counts"]

JsonObject = dict[str, object]
dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def split_text(text: str, pieces: int) -> list[str]:
    """Split *text* into at most *pieces* non-empty parts (cutting anywhere)."""
    if not text:
        return []
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    parts, start = [], 0
    for index in range(pieces):
        end = start + size + (1 if index < extra else 0)
        parts.append(text[start:end])
        start = end
    return parts


def sse_event(payload: JsonObject, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {dumps(payload)}\n\n".encode()


def reply_tag(call: MockCall) -> str:
    """The id suffix of *call*'s reply.

    Ids come back in later requests (tool call ids, thinking signatures), so
    they derive from the request, not from its arrival order, to keep the
    next request's key stable from run to run.
    """
    base = call.key[:16]
    return f"{base}_{call.occurrence}" if call.occurrence else base


def call_id(call: MockCall, index: int, given: str | None, prefix: str) -> str:
    return given or f"{prefix}_{reply_tag(call)}_{index}"


def usage_counts(call: MockCall, reply: MockReply) -> tuple[int, int]:
    output = reply.output_tokens
    if output is None:
        text = reply.text + reply.reasoning + "".join(c.arguments for c in reply.tool_calls)
        output = max(1, len(text) // 4)
    given = reply.input_tokens
    return (given if given is not None else call.input_tokens), output
