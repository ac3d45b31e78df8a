"""Anthropic and Responses events whose payload leaves out its ``type``, named only by the
SSE ``event:`` field: read as the type that names, as the recorded streams are.

The events are those of the recorded exchanges, served verbatim by the
in-process mock server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .support import SSE, load, serve_once

_RECORDED = [
    ("messages", "messages_stream_text_and_two_tool_use.json"),
    ("messages", "messages_stream_thinking.json"),
    ("responses", "responses_stream_parallel_function_calls.json"),
    ("responses", "responses_stream_text_after_function_outputs.json"),
]


def _events(name: str) -> list[dict[str, Any]]:
    body: str = load(name)["response"]["body"]
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


def _named(payload: dict[str, Any], *, typed: bool) -> bytes:
    """The event named by its payload's type, which the payload keeps only when *typed*."""
    data = payload if typed else {k: v for k, v in payload.items() if k != "type"}
    return b"event: %s\ndata: %s\n\n" % (payload["type"].encode(), json.dumps(data).encode())


@pytest.mark.parametrize(("api", "name"), _RECORDED)
@pytest.mark.parametrize("every", [True, False], ids=["every event", "one delta"])
async def test_an_event_named_only_by_its_sse_name_is_read_as_that_type(
    api: str, name: str, every: bool
) -> None:
    """R10.6: an event without a ``type`` in its data is the type its ``event:`` line
    names, so a delta so sent adds its text or arguments, not dropped without a word
    (nor a stream of such events ended as cut short)."""
    events = _events(name)
    delta = next(i for i, e in enumerate(events) if "delta" in e["type"])
    body = b"".join(_named(e, typed=not every and i != delta) for i, e in enumerate(events))
    recorded = await serve_once(api, b"".join(_named(e, typed=True) for e in events), SSE)
    collected = await serve_once(api, body, SSE)
    # The chunks too: a call's output_item.done repeats its arguments, which would make
    # up in the message for a dropped delta.
    assert collected.chunks == recorded.chunks
    assert collected.message == recorded.message
    assert collected.assembler.finish == recorded.assembler.finish
    assert collected.assembler.usage == recorded.assembler.usage
