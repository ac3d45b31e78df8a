"""The APIs, their paths, the real-time deadline, a raw Chat request and a poll of the
server's statistics, shared by the mock server modules."""

from __future__ import annotations

import json
from collections.abc import Callable

import trio

APIS = ("chat", "responses", "messages")
REAL_DEADLINE = 10.0


PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def raw_chat_request(*, stream: bool = False) -> bytes:
    """A whole HTTP request for the Chat API, as a client would send it over TCP."""
    body: dict[str, object] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
    encoded = json.dumps(body).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(encoded) + encoded
    )


async def until(condition: Callable[[], bool]) -> None:
    """Poll the server's statistics (a snapshot, on the real clock) until *condition* holds."""
    while not condition():  # noqa: ASYNC110 - statistics() is a snapshot, not an event
        await trio.sleep(0.01)
