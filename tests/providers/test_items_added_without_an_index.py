"""Responses items added without an ``output_index`` whose deltas carry one: each call
comes out once, with its name, id and arguments, and a message's text once.

The events are those of ``responses_stream_parallel_function_calls.json`` and
``responses_stream_text_after_function_outputs.json``, edited as a compatible server
sends them, and served verbatim by the in-process mock server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import trio

from retinue._content import Text, ToolCall
from retinue.providers import ProviderStreamError

from ._wire_edge_kit import responses_body
from .support import recorded_events, serve_once

Event = dict[str, Any]
Edit = Callable[[Event], Event]
_ADDED = "response.output_item.added"
_ARGUMENTS = "response.function_call_arguments.delta"
_ITEM_DONE = "response.output_item.done"
_TEXT = "responses_stream_text_after_function_outputs.json"
_CALLS = "responses_stream_parallel_function_calls.json"


def _calls(events: list[Event]) -> tuple[ToolCall, ...]:
    """The calls the recorded stream completes."""
    items = [e["item"] for e in events if e["type"] == _ITEM_DONE]
    return tuple(ToolCall(i["call_id"], i["name"], i["arguments"]) for i in items)


def _without(*fields: str) -> Edit:
    def edit(event: Event) -> Event:
        return {k: v for k, v in event.items() if k not in fields}

    return edit


def _same(event: Event) -> Event:
    return event


def _edited(events: list[Event], deltas: Edit, completed: Edit) -> list[Event]:
    """*events*, their items added without ``output_index``; the argument deltas and the
    completed items edited by *deltas* and *completed*."""
    edits: dict[str, Edit] = {
        _ADDED: _without("output_index"),
        _ARGUMENTS: deltas,
        _ITEM_DONE: completed,
    }
    return [edits.get(e["type"], _same)(e) for e in events]


@pytest.mark.parametrize(
    "completed",
    [_same, _without("output_index"), None],
    ids=["completed-with-index", "completed-without-index", "never-completed"],
)
@pytest.mark.parametrize(
    "deltas", [_same, _without("item_id")], ids=["deltas-with-item-id", "deltas-by-index-alone"]
)
async def test_a_call_added_without_an_index_is_one_call_with_its_streamed_arguments(
    deltas: Edit, completed: Edit | None, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: a call added without ``output_index``, its argument deltas carrying one, is
    the call those deltas stream: each of the two calls comes once, named, with its id and
    arguments, never an empty call beside a nameless one holding the arguments, both of
    which the agent would run."""
    events = recorded_events(_CALLS)
    edited = _edited(events, deltas, completed or _same)
    if completed is None:
        edited = [e for e in edited if e["type"] != _ITEM_DONE]
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == _calls(events)


async def test_calls_added_without_an_index_before_deltas_naming_only_an_index_are_refused(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: two calls added without ``output_index`` before argument deltas that name
    neither (an ``output_index`` alone): which call each delta is for cannot be read, and
    the stream fails ``MALFORMED_RESPONSE`` naming the field, giving no arguments to a
    nameless call the agent would run."""
    events = _edited(recorded_events(_CALLS), _without("item_id"), _same)
    added = [e for e in events if e["type"] == _ADDED]
    events = added + [e for e in events if e["type"] != _ADDED]
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("responses", responses_body(events))
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "output_index" in str(caught.value)


async def test_calls_added_without_an_index_before_deltas_naming_their_item_are_each_one(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: two calls added without ``output_index`` before any delta: deltas that name
    their item by ``item_id`` place each call, and each comes once with its arguments."""
    events = _edited(recorded_events(_CALLS), _same, _same)
    added = [e for e in events if e["type"] == _ADDED]
    reordered = added + [e for e in events if e["type"] != _ADDED]
    collected = await serve_once("responses", responses_body(reordered))
    assert collected.message.content == _calls(events)


_TEXT_EVENTS = ("response.output_text.done", "response.content_part.done", _ITEM_DONE)
_SECOND = " That is all."


def _with_a_second_part(events: list[Event]) -> list[Event]:
    """The recorded message given a second part, streamed and completed after the first."""
    out: list[Event] = []
    for event in events:
        if event["type"] != _ITEM_DONE:
            out.append(event)
            continue
        parts = [e for e in out if e["type"] in _TEXT_EVENTS]
        delta = next(e for e in reversed(out) if e["type"] == "response.output_text.delta")
        out.append({**delta, "content_index": 1, "delta": _SECOND})
        out.append({**parts[0], "content_index": 1, "text": _SECOND})
        part = {**parts[1]["part"], "text": _SECOND}
        out.append({**parts[1], "content_index": 1, "part": part})
        item = event["item"]
        out.append({**event, "item": {**item, "content": [*item["content"], part]}})
    return out


@pytest.mark.parametrize(
    "done",
    [_without("output_index"), _without("output_index", "item_id")],
    ids=["completed-naming-the-item", "completed-naming-nothing"],
)
async def test_a_message_added_without_an_index_is_streamed_once_by_deltas_carrying_one(
    done: Edit, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: a message of two parts added without ``output_index``, its deltas carrying one
    and no ``content_index``, its parts and item completed without one: each part's text
    comes once, the second's completed part not taken for another item's."""
    events = _with_a_second_part(recorded_events(_TEXT))
    answer = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    edits: dict[str, Edit] = {
        _ADDED: _without("output_index"),
        "response.output_text.delta": _without("content_index"),
        **dict.fromkeys(_TEXT_EVENTS, done),
    }
    edited = [edits.get(e["type"], _same)(e) for e in events]
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == (Text(answer + _SECOND),)


_NOTHING = _without("output_index", "item_id", "content_index")


@pytest.mark.parametrize(
    ("deltas", "parts"),
    [(_NOTHING, _same), (_without("content_index"), _without("output_index", "item_id"))],
    ids=["deltas-naming-nothing", "parts-completed-naming-nothing"],
)
async def test_events_naming_no_item_are_about_the_item_added_last(
    deltas: Edit, parts: Edit, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: a message added with ``output_index``, whose deltas or completed parts name no
    item (no ``output_index``, no ``item_id``), is the item they are about: each part's
    text comes once: they are not keyed by nothing, which would give the parts twice."""
    events = _with_a_second_part(recorded_events(_TEXT))
    answer = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    edits: dict[str, Edit] = {
        "response.output_text.delta": deltas,
        "response.output_text.done": parts,
        "response.content_part.done": parts,
    }
    edited = [edits.get(e["type"], _same)(e) for e in events]
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == (Text(answer + _SECOND),)


def _first_deltas_before_their_items(events: list[Event]) -> list[Event]:
    """Each call's first argument delta before its ``output_item.added``."""
    out = list(events)
    for index in [i for i, e in enumerate(events) if e["type"] == _ADDED]:
        out[index], out[index + 1] = out[index + 1], out[index]
    return out


async def test_a_call_a_delta_names_before_it_is_added_is_one_call(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: a call whose first argument delta (carrying ``output_index`` and ``item_id``)
    comes before the call is added without an index is the call that delta opened: each
    call comes once with its arguments, no nameless call holding the first fragment."""
    events = recorded_events(_CALLS)
    edited = _first_deltas_before_their_items(_edited(events, _same, _same))
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == _calls(events)


async def test_a_delta_at_another_index_than_the_item_it_names_is_refused(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: an argument delta whose ``output_index`` is not that of the call its
    ``item_id`` names fails ``MALFORMED_RESPONSE`` naming the field, opening no nameless
    call the agent would run, the named call missing that fragment."""
    events = recorded_events(_CALLS)
    first = next(i for i, e in enumerate(events) if e["type"] == _ARGUMENTS)
    events[first] = {**events[first], "output_index": 7}
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("responses", responses_body(events))
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "output_index 7" in str(caught.value)


@pytest.mark.parametrize("content_index", [True, False], ids=["indexed", "unindexed"])
async def test_a_part_completed_at_another_index_than_its_item_goes_with_its_item(
    content_index: bool, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: the ``content_part.done`` of a message's second part, its ``output_index`` not
    that of the message its ``item_id`` names, is that message's part: its text comes once.
    Beside deltas without ``content_index`` it does not come a second time."""
    events = _with_a_second_part(recorded_events(_TEXT))
    answer = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    last = max(i for i, e in enumerate(events) if e["type"] == "response.content_part.done")
    events[last] = {**events[last], "output_index": 7}
    if not content_index:
        events = [
            _without("content_index")(e) if e["type"] == "response.output_text.delta" else e
            for e in events
        ]
    collected = await serve_once("responses", responses_body(events))
    expected = (Text(answer), Text(_SECOND)) if content_index else (Text(answer + _SECOND),)
    assert collected.message.content == expected


async def test_items_sharing_one_id_are_told_apart_by_their_index(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: a server that gives every item one placeholder id still has each event go to
    the item at its ``output_index``; the id names neither, and nothing is refused."""
    events = [
        {**e, "item": {**e["item"], "id": "fc"}} if "item" in e else {**e, "item_id": "fc"}
        for e in recorded_events(_CALLS)
        if e["type"] != "response.completed"
    ]
    events.append({"type": "response.completed", "response": {"status": "completed"}})
    collected = await serve_once("responses", responses_body(events))
    assert collected.message.content == _calls(recorded_events(_CALLS))


async def test_a_message_completed_at_another_index_than_it_was_added_at_comes_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: a message whose ``output_item.done`` carries another ``output_index`` than its
    deltas, its complete text a full stop longer than they streamed, is the item those
    deltas streamed: its text comes once, not a second time beside the deltas."""
    events = recorded_events(_TEXT)
    answer = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    edited = [
        json.loads(json.dumps(e).replace(json.dumps(answer), json.dumps(answer + ".")))
        if e["type"] == _ITEM_DONE
        else e
        for e in events
    ]
    done = next(i for i, e in enumerate(edited) if e["type"] == _ITEM_DONE)
    edited[done] = {**edited[done], "output_index": 7}
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == (Text(answer),)


@pytest.mark.parametrize("moved", [_ADDED, "response.output_text.delta"])
async def test_text_at_another_index_than_the_message_it_names_goes_with_that_message(
    moved: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: a message added at another ``output_index`` than its deltas carry, or a delta
    at another than its message's, all naming the message by ``item_id``: the text is that
    message's, once and in order, the delta opening no text block of its own."""
    events = recorded_events(_TEXT)
    answer = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    last = max(i for i, e in enumerate(events) if e["type"] == moved)
    events[last] = {**events[last], "output_index": 7}
    collected = await serve_once("responses", responses_body(events))
    assert collected.message.content == (Text(answer),)
