"""Responses items as compatible servers send them: items sent only complete, streamed in
deltas and then complete, or without ``output_index``, told apart by item id or part index.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from retinue._content import Reasoning, Text, ToolCall
from retinue._stream import TextDelta, ToolCallDelta

from ._wire_edge_kit import COMPLETE_MESSAGE, typed_event
from .support import serve_once

# Complete items in the shapes of the recorded Responses streams (``output_item.done``,
# ``response.completed``'s ``output``).
COMPLETE_REASONING: dict[str, Any] = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Plan."}, {"type": "summary_text", "text": "Go."}],
}


COMPLETE_CALL: dict[str, Any] = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "lookup",
    "arguments": '{"city":"Oslo"}',
}
COMPLETE_ITEMS: list[dict[str, Any]] = [COMPLETE_REASONING, COMPLETE_MESSAGE, COMPLETE_CALL]
COMPLETE_CONTENT = (
    # Signed with the item as the API returned it, to be sent back with the call.
    Reasoning("Plan.\n\nGo.", json.dumps(COMPLETE_REASONING, separators=(",", ":"))),
    Text("Checking Oslo."),
    ToolCall("call_1", "lookup", '{"city":"Oslo"}'),
)


def _items_done() -> list[dict[str, Any]]:
    return [
        {"type": "response.output_item.done", "output_index": index, "item": item}
        for index, item in enumerate(COMPLETE_ITEMS)
    ]


def _completed(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "response.completed", "response": {"status": "completed", "output": output}}


@pytest.mark.parametrize(
    "events",
    [
        [*_items_done(), _completed([])],
        [_completed(COMPLETE_ITEMS)],
        [*_items_done(), _completed(COMPLETE_ITEMS)],
    ],
    ids=["items-done", "completed-output", "both"],
)
async def test_responses_items_sent_only_complete_keep_their_content(
    events: list[dict[str, Any]],
) -> None:
    """R10.2: a compatible server that streams no deltas, only each item complete and/or
    the completed response's ``output``, still yields the text and the call with its
    arguments, once, and streams them as deltas.
    """
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == COMPLETE_CONTENT
    assert collected.assembler.finish.kind == "tool-calls"
    texts = [chunk.text for chunk in collected.chunks if isinstance(chunk, TextDelta)]
    calls = [chunk for chunk in collected.chunks if isinstance(chunk, ToolCallDelta)]
    assert texts == ["Checking Oslo."]
    assert [(c.id, c.name, c.arguments_delta) for c in calls] == [
        ("call_1", "lookup", '{"city":"Oslo"}')
    ]


@pytest.mark.parametrize(
    "output", [[], [COMPLETE_CALL]], ids=["completed-empty", "completed-with-the-call"]
)
async def test_responses_call_added_whole_keeps_its_arguments(output: list[Any]) -> None:
    """R10.2: a compatible server that adds a call whole (``output_item.added`` with its
    arguments) and sends no deltas nor ``output_item.done`` still yields its arguments, as
    the SDK's snapshot has them, held until the call ends: the call never runs with ``{}``."""
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": COMPLETE_CALL},
        _completed(output),
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (ToolCall("call_1", "lookup", '{"city":"Oslo"}'),)
    calls = [chunk for chunk in collected.chunks if isinstance(chunk, ToolCallDelta)]
    assert [(c.id, c.name, c.arguments_delta) for c in calls] == [
        ("call_1", "lookup", ""),
        (None, None, '{"city":"Oslo"}'),
    ]


_CALL_ITEM = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'}
_MESSAGE_ITEM = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hello"}],
}


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (
            [
                {"type": "response.output_text.delta", "delta": "Hello"},
                {"type": "response.completed", "response": {"output": [_MESSAGE_ITEM]}},
            ],
            (Text("Hello"),),
        ),
        (
            [
                {"type": "response.output_item.added", "item": {**_CALL_ITEM, "arguments": ""}},
                {"type": "response.function_call_arguments.delta", "delta": '{"a":1}'},
                {"type": "response.output_item.done", "item": _CALL_ITEM},
                {"type": "response.completed", "response": {"output": [_CALL_ITEM]}},
            ],
            (ToolCall("c1", "f", '{"a":1}'),),
        ),
    ],
    ids=["text", "call"],
)
async def test_responses_stream_without_output_index_is_not_doubled_by_its_completed_output(
    events: list[dict[str, Any]], expected: tuple[object, ...]
) -> None:
    """R10.2: a server that leaves out ``output_index`` still gets each streamed item once;
    the completed response's ``output`` repeats what streamed (a doubled call would run twice).
    """
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == expected


@pytest.mark.parametrize("content_index", [{"content_index": 0}, {}], ids=["indexed", "no-index"])
async def test_responses_items_streamed_in_deltas_are_not_doubled_when_complete(
    content_index: dict[str, Any],
) -> None:
    """R10.2: an item seen in deltas is not repeated by its ``output_item.done`` nor by the
    completed response's ``output`` (even when the deltas carry no ``content_index``).
    """
    summary = "response.reasoning_summary_text.delta"
    call_added = {**COMPLETE_CALL, "status": "in_progress", "arguments": ""}
    arguments = "response.function_call_arguments.delta"
    events: list[dict[str, Any]] = [
        {"type": summary, "output_index": 0, "summary_index": 0, "delta": "Plan."},
        {"type": summary, "output_index": 0, "summary_index": 1, "delta": "Go."},
        {"type": "response.output_item.added", "output_index": 1, "item": COMPLETE_MESSAGE},
        {"type": "response.output_text.delta", "output_index": 1, "delta": "Checking "}
        | content_index,
        {"type": "response.output_text.delta", "output_index": 1, "delta": "Oslo."} | content_index,
        {"type": "response.output_item.added", "output_index": 2, "item": call_added},
        {"type": arguments, "output_index": 2, "delta": '{"city":'},
        {"type": arguments, "output_index": 2, "delta": '"Oslo"}'},
        *_items_done(),
        _completed(COMPLETE_ITEMS),
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == COMPLETE_CONTENT
    texts = [chunk.text for chunk in collected.chunks if isinstance(chunk, TextDelta)]
    assert texts == ["Checking ", "Oslo."]


_TWO_PARTS: dict[str, Any] = {
    "id": "msg_2",
    "type": "message",
    "role": "assistant",
    "content": [
        {"type": "output_text", "annotations": [], "text": "Checking Oslo."},
        {"type": "output_text", "annotations": [], "text": " It is sunny."},
    ],
}


def _part_streamed(index: int) -> list[dict[str, Any]]:
    """Part *index* of ``_TWO_PARTS`` as the API streams it: added, deltas, done."""
    part = _TWO_PARTS["content"][index]
    where = {"item_id": "msg_2", "output_index": 0, "content_index": index}
    half = len(part["text"]) // 2
    return [
        {"type": "response.content_part.added", **where, "part": {**part, "text": ""}},
        {"type": "response.output_text.delta", **where, "delta": part["text"][:half]},
        {"type": "response.output_text.delta", **where, "delta": part["text"][half:]},
        {"type": "response.content_part.done", **where, "part": part},
    ]


def _part_complete(index: int, *, part_done: bool) -> list[dict[str, Any]]:
    """Part *index* of ``_TWO_PARTS`` sent with no delta: only complete, if at all."""
    part = _TWO_PARTS["content"][index]
    where = {"item_id": "msg_2", "output_index": 0, "content_index": index}
    return [{"type": "response.content_part.done", **where, "part": part}] if part_done else []


def _two_part_message(*parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**_TWO_PARTS, "content": []},
        },
        *(event for part in parts for event in part),
        {"type": "response.output_item.done", "output_index": 0, "item": _TWO_PARTS},
        _completed([_TWO_PARTS]),
    ]


@pytest.mark.parametrize(
    "events",
    [
        _two_part_message(_part_streamed(0), _part_complete(1, part_done=False)),
        _two_part_message(_part_streamed(0), _part_complete(1, part_done=True)),
        _two_part_message(_part_complete(0, part_done=True), _part_streamed(1)),
    ],
    ids=["first-streamed-second-in-item", "first-streamed-second-in-part", "second-streamed"],
)
async def test_responses_message_part_without_deltas_is_kept_beside_a_streamed_part(
    events: list[dict[str, Any]],
) -> None:
    """R10.2: in a message item where one part streamed deltas and the other came only
    complete (its ``content_part.done`` or the item's ``output_item.done``), each part's
    text arrives once, in part order; the streamed part is not repeated.
    """
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (Text("Checking Oslo."), Text(" It is sunny."))
    texts = "".join(chunk.text for chunk in collected.chunks if isinstance(chunk, TextDelta))
    assert texts == "Checking Oslo. It is sunny."


def _call_by_item_id(item_id: str, call_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
    item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name}
    return [
        {"type": "response.output_item.added", "item": {**item, "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "item_id": item_id, "delta": arguments},
        {"type": "response.output_item.done", "item": {**item, "arguments": arguments}},
    ]


async def test_responses_calls_without_output_index_are_told_apart_by_item_id() -> None:
    """R10.2: a server that sends no ``output_index`` still names each event's item; two
    calls are two blocks, not one block that loses the first call."""
    events = [
        *_call_by_item_id("fc_1", "call_a", "get_weather", '{"city":"London"}'),
        *_call_by_item_id("fc_2", "call_b", "get_time", '{"tz":"UTC"}'),
        _completed([]),
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (
        ToolCall("call_a", "get_weather", '{"city":"London"}'),
        ToolCall("call_b", "get_time", '{"tz":"UTC"}'),
    )


@pytest.mark.parametrize(
    ("item_id", "delta_item_id"),
    [(None, "fc_1"), ("fc_1", "call_a")],
    ids=["items-without-id", "deltas-naming-the-call-id"],
)
async def test_responses_deltas_naming_no_item_id_an_item_gave_stay_with_that_item(
    item_id: str | None, delta_item_id: str
) -> None:
    """R10.2: without ``output_index``, a delta's ``item_id`` that no item event gave (items
    sent without one, or a server naming the call id) belongs to the item streaming; one
    call, not a nameless second one."""
    item: dict[str, Any] = {"type": "function_call", "call_id": "call_a", "name": "get_weather"}
    if item_id is not None:
        item["id"] = item_id
    arguments = '{"city":"Oslo"}'
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "item": {**item, "arguments": ""}},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": delta_item_id,
            "delta": arguments,
        },
        {"type": "response.output_item.done", "item": {**item, "arguments": arguments}},
        _completed([]),
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (ToolCall("call_a", "get_weather", arguments),)


async def test_responses_an_item_added_without_an_id_is_a_block_of_its_own() -> None:
    """R10.2: without ``output_index``, an item added without an id after one with an id is
    the item streaming now; its deltas do not join the earlier call."""
    events = [
        *_call_by_item_id("fc_1", "call_a", "f", "{}"),
        {
            "type": "response.output_item.added",
            "item": {"type": "function_call", "call_id": "call_b", "name": "g", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", "delta": '{"x":1}'},
        _completed([]),
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (
        ToolCall("call_a", "f", "{}"),
        ToolCall("call_b", "g", '{"x":1}'),
    )


async def test_responses_deltas_without_output_index_are_not_doubled_by_their_items() -> None:
    """R10.2: deltas that leave out ``output_index`` and complete items that carry it are the
    same message and the same call: each is kept once (a doubled call would run twice).
    """
    call_added = {**COMPLETE_CALL, "status": "in_progress", "arguments": ""}
    arguments = "response.function_call_arguments.delta"
    streamed: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "item": COMPLETE_MESSAGE},
        {"type": "response.output_text.delta", "content_index": 0, "delta": "Checking Oslo."},
        {"type": "response.output_item.added", "item": call_added},
        {"type": arguments, "delta": '{"city":'},
        {"type": arguments, "delta": '"Oslo"}'},
    ]
    done = [
        {"type": "response.output_item.done", "output_index": index, "item": item}
        for index, item in enumerate([COMPLETE_MESSAGE, COMPLETE_CALL])
    ]
    done.append(_completed([COMPLETE_MESSAGE, COMPLETE_CALL]))
    collected = await serve_once("responses", b"".join(map(typed_event, [*streamed, *done])))
    assert collected.message.content == COMPLETE_CONTENT[1:]
    assert collected.assembler.finish.kind == "tool-calls"


@pytest.mark.parametrize("part_done", [False, True], ids=["deltas", "deltas-and-part-done"])
async def test_responses_parts_counted_from_one_in_the_stream_are_not_doubled(
    part_done: bool,
) -> None:
    """R10.2: a server counting ``content_index`` from 1 in its stream events, and so
    unlike the places of the parts in the complete item, streams each part once.
    """
    events: list[dict[str, Any]] = []
    for index, part in enumerate(_TWO_PARTS["content"]):
        where = {"item_id": "msg_2", "output_index": 0, "content_index": index + 1}
        events.append({"type": "response.output_text.delta", **where, "delta": part["text"]})
        if part_done:
            events.append({"type": "response.content_part.done", **where, "part": part})
    collected = await serve_once("responses", b"".join(map(typed_event, _two_part_message(events))))
    assert collected.message.content == (Text("Checking Oslo."), Text(" It is sunny."))


async def test_responses_reasoning_streamed_without_summary_index_comes_once() -> None:
    """R10.2: summary deltas without ``summary_index`` run the summary's parts together;
    the reasoning item completed after them, without ``output_index``, is the same item.
    It does not come a second time, its parts apart, as the item's own."""
    summary = "response.reasoning_summary_text.delta"
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "item": {**COMPLETE_REASONING, "summary": []}},
        {"type": summary, "item_id": "rs_1", "output_index": 0, "delta": "Plan."},
        {"type": summary, "item_id": "rs_1", "output_index": 0, "delta": "Go."},
        {"type": "response.output_item.done", "item": COMPLETE_REASONING},
        _completed([]),
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    signature = json.dumps(COMPLETE_REASONING, separators=(",", ":"))
    assert collected.message.content == (Reasoning("Plan.Go.", signature),)
