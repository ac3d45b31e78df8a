"""Responses streams whose items share one placeholder id, or whose deltas name an id no
item was added with: the id names no item, so what each event is for is read from its
``output_index`` (R10.2, R10.3).

Served verbatim by the in-process mock server, as a compatible server sends them.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from retinue._content import Text, ToolCall

from ._wire_edge_kit import typed_event
from .support import serve_once

Event = dict[str, Any]
_END = {"type": "response.completed", "response": {"status": "completed"}}


def _text(output: int, item_id: str, text: str) -> Event:
    return {
        "type": "response.output_text.delta",
        "output_index": output,
        "content_index": 0,
        "item_id": item_id,
        "delta": text,
    }


def _arguments(output: int, item_id: str, arguments: str) -> Event:
    return {
        "type": "response.function_call_arguments.delta",
        "output_index": output,
        "item_id": item_id,
        "delta": arguments,
    }


def _call(item_id: str, call_id: str, arguments: str = "") -> dict[str, str]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": "lookup",
        "arguments": arguments,
    }


def _call_done(output: int, item_id: str, call_id: str, arguments: str) -> Event:
    item = _call(item_id, call_id, arguments)
    return {"type": "response.output_item.done", "output_index": output, "item": item}


async def _content(events: list[Event]) -> tuple[object, ...]:
    collected = await serve_once("responses", b"".join(map(typed_event, [*events, _END])))
    return collected.message.content


async def test_items_never_added_under_one_placeholder_id_are_told_apart_by_index(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: deltas of items never added, all naming one empty ``item_id``: a message and
    a call, or two messages, each come once, not refused as an index contradicting the id
    nor merged into one message."""
    message_and_call = [
        _text(0, "", "Hi"),
        _arguments(1, "", '{"a":1}'),
        _call_done(1, "", "call_1", '{"a":1}'),
    ]
    assert await _content(message_and_call) == (
        Text("Hi"),
        ToolCall("call_1", "lookup", '{"a":1}'),
    )
    two_messages = [_text(0, "", "First."), _text(1, "", "Second.")]
    assert await _content(two_messages) == (Text("First."), Text("Second."))


@pytest.mark.parametrize("placeholder", ["fc", ""], ids=["an id", "the empty id"])
async def test_calls_added_without_an_index_under_one_id_are_each_one_call(
    placeholder: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: two calls added without ``output_index`` under one id (a placeholder, which
    names neither, the empty one too), each streamed by deltas carrying an index: each
    call comes once with its own arguments."""
    events: list[Event] = []
    for output, call_id in enumerate(["call_1", "call_2"]):
        arguments = f'{{"a":{output + 1}}}'
        events += [
            {"type": "response.output_item.added", "item": _call(placeholder, call_id)},
            _arguments(output, placeholder, arguments),
            _call_done(output, placeholder, call_id, arguments),
        ]
    assert await _content(events) == (
        ToolCall("call_1", "lookup", '{"a":1}'),
        ToolCall("call_2", "lookup", '{"a":2}'),
    )


def _added(output: int, item: dict[str, Any]) -> Event:
    return {"type": "response.output_item.added", "output_index": output, "item": item}


def _first_delta_before_added(output: int, item: dict[str, Any], delta: Event) -> list[Event]:
    """An item streamed at *output*, its first delta before its ``output_item.added``."""
    done = {"type": "response.output_item.done", "output_index": output, "item": item}
    return [delta, _added(output, {**item, "content": [], "arguments": ""}), done]


async def test_a_delta_before_its_item_is_added_under_a_shared_id_streams_its_own_item(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: every item added under one id, a message's or call's first delta coming before
    its ``output_item.added``: the id still names the item before it, a reasoning item or a
    completed call, which no delta streams. The text is the message's, one block, not split
    off into the item before; the second call's arguments are its own, not refused."""
    reasoning = {"type": "reasoning", "id": "x", "summary": []}
    part = {"type": "output_text", "text": "Hello", "annotations": []}
    message = {"type": "message", "id": "x", "role": "assistant", "content": [part]}
    events = [
        _added(0, reasoning),
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        *_first_delta_before_added(1, message, _text(1, "x", "He")),
    ]
    events.insert(-1, _text(1, "x", "llo"))
    assert (await _content(events))[1:] == (Text("Hello"),)  # after the reasoning's block
    calls: list[Event] = []
    for output, call_id in enumerate(["call_1", "call_2"]):
        arguments = f'{{"a":{output + 1}}}'
        item = _call("x", call_id, arguments)
        calls += _first_delta_before_added(output, item, _arguments(output, "x", arguments))
    assert await _content(calls) == (
        ToolCall("call_1", "lookup", '{"a":1}'),
        ToolCall("call_2", "lookup", '{"a":2}'),
    )


async def test_a_second_message_under_a_shared_id_opened_before_it_is_added_is_its_own(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: two messages under one id, the second's first delta before its
    ``output_item.added``: the id names the first message, completed already, so the delta
    is the second's: each text comes once, whole, not run on from the first."""
    events: list[Event] = []
    for output, text in enumerate(["First.", "Second."]):
        part = {"type": "output_text", "text": text, "annotations": []}
        message = {"type": "message", "id": "x", "role": "assistant", "content": [part]}
        events += _first_delta_before_added(output, message, _text(output, "x", text[:2]))
        events.insert(-1, _text(output, "x", text[2:]))
    assert await _content(events) == (Text("First."), Text("Second."))
