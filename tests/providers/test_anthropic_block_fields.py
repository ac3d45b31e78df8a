"""Anthropic Messages events whose fields say what a block holds, or how the answer ended,
given a value of the wrong JSON type: each fails the stream as malformed, rather than
losing a max_tokens finish, a signature or a block's text without a word.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

from typing import Any

import pytest

from retinue._content import Text
from retinue._stream import MAX_TOKENS, Finish
from retinue.providers import ProviderStreamError

from ._wire_edge_kit import MESSAGE_END, MESSAGE_START, typed_event
from .support import serve_once

Event = dict[str, Any]


def _body(*events: Event, end: list[Event] = MESSAGE_END) -> bytes:
    return b"".join(map(typed_event, [MESSAGE_START, *events, *end]))


def _start(block: Event, index: int = 0) -> Event:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(delta: Event, index: int | None = 0) -> Event:
    event: Event = {"type": "content_block_delta", "delta": delta}
    if index is not None:
        event["index"] = index
    return event


def _text(text: str, index: int | None = 0) -> Event:
    return _delta({"type": "text_delta", "text": text}, index)


STOP = {"type": "content_block_stop", "index": 0}
THINKING = {"type": "thinking", "thinking": "", "signature": ""}
FINISH: list[Event] = [
    {"type": "message_delta", "delta": "max_tokens", "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
]

_WRONG_TYPES: dict[str, tuple[bytes, str]] = {
    "message-delta-a-string": (_body(_text("1."), end=FINISH), "message_delta's delta"),
    "signature": (
        _body(
            _start(THINKING),
            _delta({"type": "thinking_delta", "thinking": "hm"}),
            _delta({"type": "signature_delta", "signature": ["EuYD"]}),
            STOP,
        ),
        "a signature_delta's signature is of type list",
    ),
    "redacted-data": (
        _body(_start({"type": "redacted_thinking", "data": 7}), STOP),
        "a redacted_thinking block's data is of type int",
    ),
    "start-text": (
        _body(_start({"type": "text", "text": 7}), STOP),
        "a text block's text is of type int",
    ),
    "start-thinking": (
        _body(_start({**THINKING, "thinking": ["hm"]}), STOP),
        "a thinking block's thinking is of type list",
    ),
    "start-signature": (
        _body(_start({**THINKING, "thinking": "hm", "signature": 7}), STOP),
        "a thinking block's signature is of type int",
    ),
}


@pytest.mark.parametrize(("body", "field"), list(_WRONG_TYPES.values()), ids=list(_WRONG_TYPES))
async def test_an_anthropic_field_of_the_wrong_type_fails_the_stream(
    body: bytes, field: str
) -> None:
    """R10.3: the stream fails as MALFORMED_RESPONSE naming the field and its type."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", body)
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert field in str(caught.value)


async def test_a_null_message_delta_and_block_text_read_as_absent() -> None:
    """R10.6: ``null`` carries nothing: the block's text comes from its deltas, and the
    finish from the message_delta that has one."""
    end: list[Event] = [
        {"type": "message_delta", "delta": None, "usage": {"output_tokens": 1}},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}},
        {"type": "message_stop"},
    ]
    body = _body(_start({"type": "text", "text": None}), _text("Hi"), STOP, end=end)
    collected = await serve_once("messages", body)
    assert collected.message.content == (Text("Hi"),)
    assert collected.chunks[-1] == Finish(MAX_TOKENS)


async def test_a_message_stop_before_any_message_delta_fails_the_stream() -> None:
    """R10.3: the API sends the message_delta that says how the answer ended before its
    message_stop: one without it ended unknown (a max_tokens finish read as a stop)."""
    body = _body(_text("1. Alabama"), end=[{"type": "message_stop"}])
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", body)
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "message_stop came before any message_delta" in str(caught.value)


async def test_a_later_message_delta_with_usage_alone_keeps_how_the_answer_ended() -> None:
    """R10.2: a second ``message_delta`` carrying only usage (a gateway's) keeps the
    ``max_tokens`` the first gave, where it turned the cut answer into a stop."""
    end: list[Event] = [
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {}},
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]
    collected = await serve_once("messages", _body(_text("1. Alabama"), end=end))
    assert collected.chunks[-1] == Finish(MAX_TOKENS)
