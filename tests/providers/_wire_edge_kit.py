"""What the wire edge case modules share: an SSE event named by its payload's type, a
Responses body numbered in order, the start and end events of an Anthropic message, and a
complete Responses message item."""

from __future__ import annotations

import json
from typing import Any


def typed_event(payload: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's ``type`` (Anthropic and Responses streams)."""
    return (
        b"event: " + payload["type"].encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"
    )


def responses_body(events: list[dict[str, Any]]) -> bytes:
    """A Responses SSE body of *events* numbered 0, 1, 2, ... in the order given, as a
    server sending them so numbers them: a recording edited (events moved, left out or
    added) would otherwise keep numbers that no longer count, read as events lost."""
    return b"".join(typed_event({**e, "sequence_number": n}) for n, e in enumerate(events))


MESSAGE_START = {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}
MESSAGE_END: list[dict[str, Any]] = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
]


COMPLETE_MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "annotations": [], "text": "Checking Oslo."}],
}
