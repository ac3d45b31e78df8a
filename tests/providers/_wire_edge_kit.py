"""What the wire edge case modules share: an SSE event named by its payload's type, the start
and end events of an Anthropic message, and a complete Responses message item."""

from __future__ import annotations

import json
from typing import Any


def typed_event(payload: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's ``type`` (Anthropic and Responses streams)."""
    return (
        b"event: " + payload["type"].encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"
    )


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
