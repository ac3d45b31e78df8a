"""Anthropic Messages block events that name no block, or a block no start opened once
starts are being sent: each fails the stream as malformed, rather than splitting a
block's text in two and putting part of it after the rest, out of order.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

from typing import Any

import pytest

from retinue._content import Reasoning, Text
from retinue.providers import ProviderStreamError

from ._wire_edge_kit import MESSAGE_END, MESSAGE_START, typed_event
from .support import serve_once

Event = dict[str, Any]
STOP = {"type": "content_block_stop", "index": 0}


def _body(*events: Event) -> bytes:
    return b"".join(map(typed_event, [MESSAGE_START, *events, *MESSAGE_END]))


def _start(block: Event, index: int = 0) -> Event:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _text(text: str, index: int | None = 0) -> Event:
    event: Event = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": text}}
    if index is not None:
        event["index"] = index
    return event


_UNPLACED: dict[str, bytes] = {
    "delta-without-index": _body(
        _start({"type": "text", "text": ""}), _text("A"), _text("B", None), _text("C"), STOP
    ),
    "delta-for-a-block-never-started": _body(
        _start({"type": "text", "text": ""}), _text("A"), _text("B", 5), _text("C"), STOP
    ),
    "start-without-index": _body(
        {"type": "content_block_start", "content_block": {"type": "text", "text": "A"}},
        _text("B"),
    ),
    "stop-without-index": _body(
        _start({"type": "text", "text": ""}), _text("A"), {"type": "content_block_stop"}
    ),
}


@pytest.mark.parametrize("body", list(_UNPLACED.values()), ids=list(_UNPLACED))
async def test_an_anthropic_block_event_naming_no_started_block_fails_the_stream(
    body: bytes,
) -> None:
    """R10.3: a block event without an index, or a delta for an index no start opened
    once starts are being sent, fails as MALFORMED_RESPONSE: its text would be split
    from its block's and put after it ('AC' then 'B')."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", body)
    assert caught.value.code == "MALFORMED_RESPONSE"


async def test_anthropic_delta_only_blocks_stay_allowed() -> None:
    """R10.6: a stream sending no starts has its blocks opened by their first deltas."""
    body = _body(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hm"},
        },
        _text("Hi", 1),
        _text(" there", 1),
    )
    collected = await serve_once("messages", body)
    assert collected.message.content == (Reasoning("hm"), Text("Hi there"))
