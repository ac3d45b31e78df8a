"""Recorded streams with one field that says what an event is, or how the answer ended,
given a value of the wrong type: refused as malformed, naming the field, not read as
saying nothing, which would lose the event's text, or the finish, without a word.

The events are those of the recorded exchanges, served verbatim by the
in-process mock server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from retinue.providers import ProviderStreamError

from .support import SSE, load, serve_once

Event = dict[str, Any]


def _events(name: str) -> list[Event]:
    body: str = load(name)["response"]["body"]
    lines = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


def _named(payload: Event, name: str | None) -> bytes:
    head = b"" if name is None else b"event: " + name.encode() + b"\n"
    return head + b"data: " + json.dumps(payload).encode() + b"\n\n"


def _edited(name: str, edit: Callable[[Event], bool]) -> bytes:
    """The recorded stream with its first event that *edit* changes (returns true for)
    changed; each event keeps the name it was recorded with."""
    out, edited = [], False
    for payload in _events(name):
        kind = payload.get("type")
        if not edited:
            edited = edit(payload)
        out.append(_named(payload, kind if isinstance(kind, str) else None))
    assert edited
    return b"".join(out) + (b"data: [DONE]\n\n" if name.startswith("chat") else b"")


def _typed(kind: str, value: object) -> Callable[[Event], bool]:
    def edit(payload: Event) -> bool:
        if payload.get("type") != kind:
            return False
        payload["type"] = value
        return True

    return edit


def _stop_reason(payload: Event) -> bool:
    if payload.get("type") != "message_delta":
        return False
    payload["delta"]["stop_reason"] = ["max_tokens"]
    return True


def _delta_type(value: object) -> Callable[[Event], bool]:
    def edit(payload: Event) -> bool:
        if payload.get("type") != "content_block_delta":
            return False
        if value is None:
            del payload["delta"]["type"]
        else:
            payload["delta"]["type"] = value
        return True

    return edit


def _text_of(kind: str, *path: str) -> Callable[[Event], bool]:
    """An edit giving the text at *path* in the first event of *kind* a number."""

    def edit(payload: Event) -> bool:
        if payload.get("type") != kind:
            return False
        where = payload
        for step in path[:-1]:
            where = where[step]
        if not isinstance(where.get(path[-1]), str):
            return False
        where[path[-1]] = 7
        return True

    return edit


def _response(payload: Event) -> bool:
    if payload.get("type") != "response.incomplete":
        return False
    payload["response"] = "incomplete"
    return True


def _first_text_choice(value: object) -> Callable[[Event], bool]:
    def edit(payload: Event) -> bool:
        choices = payload.get("choices")
        if not choices or not choices[0]["delta"].get("content"):
            return False
        payload["choices"] = value if value is not None else [choices[0]["delta"]["content"]]
        return True

    return edit


def _chat_finish(payload: Event) -> bool:
    choices = payload.get("choices")
    if not choices or not choices[0].get("finish_reason"):
        return False
    choices[0]["finish_reason"] = 7
    return True


def _chat_content(payload: Event) -> bool:
    choices = payload.get("choices")
    if not choices or not choices[0]["delta"].get("content"):
        return False
    choices[0]["delta"]["content"] = 7
    return True


_CASES: list[tuple[str, str, Callable[[Event], bool], str]] = [
    ("messages", "messages_stream_text.json", _typed("content_block_delta", 7), "type"),
    ("messages", "messages_stream_max_tokens.json", _stop_reason, "stop_reason"),
    ("messages", "messages_stream_text.json", _delta_type(["text_delta"]), "delta's type"),
    ("messages", "messages_stream_text.json", _delta_type(None), "delta's type"),
    (
        "responses",
        "responses_stream_incomplete_max_output_tokens.json",
        _typed("response.output_text.delta", ["response.output_text.delta"]),
        "type",
    ),
    ("responses", "responses_stream_incomplete_max_output_tokens.json", _response, "response"),
    (
        "responses",
        "responses_stream_incomplete_max_output_tokens.json",
        _text_of("response.output_text.delta", "delta"),
        "delta",
    ),
    (
        "responses",
        "responses_stream_parallel_function_calls.json",
        _text_of("response.function_call_arguments.delta", "delta"),
        "delta",
    ),
    (
        "messages",
        "messages_stream_text.json",
        _text_of("content_block_delta", "delta", "text"),
        "text",
    ),
    (
        "messages",
        "messages_stream_text_and_two_tool_use.json",
        _text_of("content_block_delta", "delta", "partial_json"),
        "partial_json",
    ),
    (
        "messages",
        "messages_stream_thinking.json",
        _text_of("content_block_delta", "delta", "thinking"),
        "thinking",
    ),
    ("chat", "chat_stream_text_usage.json", _first_text_choice({"index": 0}), "choices"),
    ("chat", "chat_stream_text_usage.json", _first_text_choice(None), "choice"),
    ("chat", "chat_stream_text_usage.json", _chat_finish, "finish_reason"),
    ("chat", "chat_stream_text_usage.json", _chat_content, "content"),
]


@pytest.mark.parametrize(
    ("api", "name", "edit", "field"),
    _CASES,
    ids=[
        "anthropic type",
        "stop_reason",
        "delta type",
        "no delta type",
        "responses type",
        "response",
        "responses text",
        "responses arguments",
        "anthropic text",
        "anthropic input",
        "anthropic thinking",
        "choices",
        "choice",
        "chat finish_reason",
        "chat content",
    ],
)
async def test_a_wrong_typed_field_saying_what_came_is_refused(
    api: str, name: str, edit: Callable[[Event], bool], field: str
) -> None:
    """R10.3: the stream fails as malformed, naming the field, rather than ending as if
    the event had not come."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, _edited(name, edit), SSE)
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert field in str(caught.value)
