"""Responses items and Anthropic content blocks as compatible servers send them: items sent only
complete or without ``output_index``, function calls without ``call_id``, reasoning summary
parts, usage counts left null, and thinking with or without its signature.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from retinue._content import Reasoning, Text, ToolCall
from retinue._stream import TextDelta, ToolCallDelta, Usage

from ._wire_edge_kit import COMPLETE_MESSAGE, MESSAGE_END, MESSAGE_START, typed_event
from .support import JSON, SSE, serve_once


async def test_anthropic_null_counts_in_message_delta_keep_the_start_counts() -> None:
    """R10.5: ``message_delta`` usage fields are optional; a ``null`` keeps the known count."""
    start_usage = {
        "input_tokens": 17,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 2000,
        "output_tokens": 1,
    }
    end_usage = {
        "input_tokens": None,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "output_tokens": 15,
    }
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": start_usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": end_usage},
        {"type": "message_stop"},
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.assembler.usage == Usage(17, 15, 2000, 100)


async def test_anthropic_thinking_sent_whole_in_its_start_keeps_its_signature() -> None:
    """R10.2: a thinking block whose start carries its text and signature is signed
    reasoning, as the same block in a whole response is; the signature was dropped."""
    thinking = {"type": "thinking", "thinking": "all at once", "signature": "SIG"}
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": thinking},
        {"type": "content_block_stop", "index": 0},
        *MESSAGE_END,
    ]
    collected = await serve_once("messages", b"".join(map(typed_event, events)))
    assert collected.message.content == (Reasoning("all at once", "SIG"),)


def _unsigned_thinking_body(thinking: dict[str, Any]) -> bytes:
    message = {
        "type": "message",
        "role": "assistant",
        "content": [thinking, {"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return json.dumps(message).encode()


def _unsigned_thinking_stream() -> bytes:
    thinking = {"type": "thinking", "thinking": "", "signature": ""}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": thinking},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hmm"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": ""},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "hi"},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    return b"".join(map(typed_event, events))


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (_unsigned_thinking_body({"type": "thinking", "thinking": "hmm"}), JSON),
        (_unsigned_thinking_body({"type": "thinking", "thinking": "hmm", "signature": ""}), JSON),
        (_unsigned_thinking_stream(), SSE),
    ],
    ids=["whole-without-signature", "whole-empty-signature", "streamed-empty-signature"],
)
async def test_anthropic_thinking_without_a_signature_is_unsigned(
    body: bytes, headers: Any
) -> None:
    """Thinking from a server that does not sign it (an Anthropic-compatible endpoint) is
    unsigned reasoning, streamed or whole: an empty signature would be replayed, and refused.
    """
    collected = await serve_once("messages", body, headers)
    assert collected.message.content == (Reasoning("hmm", None), Text("hi"))


async def test_responses_reasoning_summary_parts_are_separate_paragraphs() -> None:
    """R10.2: each summary part of a reasoning item is its own paragraph, not run together."""
    summary = "response.reasoning_summary_text.delta"
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning"}},
        {"type": summary, "output_index": 0, "summary_index": 0, "delta": "Plan the "},
        {"type": summary, "output_index": 0, "summary_index": 0, "delta": "answer."},
        {"type": summary, "output_index": 0, "summary_index": 1, "delta": "Check it."},
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (Reasoning("Plan the answer.\n\nCheck it."),)


async def test_responses_whole_body_reasoning_summary_parts_are_separate_paragraphs() -> None:
    """R10.2: a non-streamed reasoning item's summary parts are joined as paragraphs too."""
    parts = [{"type": "summary_text", "text": "Plan."}, {"type": "summary_text", "text": "Check."}]
    body = {"status": "completed", "output": [{"type": "reasoning", "summary": parts}]}
    collected = await serve_once("responses", json.dumps(body).encode(), JSON)
    assert collected.message.content == (Reasoning("Plan.\n\nCheck."),)


FUNCTION_CALL_WITHOUT_CALL_ID = {"type": "function_call", "name": "lookup", "arguments": "{}"}


async def test_responses_streamed_function_call_without_call_id_keeps_its_minted_id() -> None:
    """R10.2: a function call sent without ``call_id`` ends with the id its first delta
    carried, not an empty one (a transcript with an empty id is refused later).
    """
    added = {**FUNCTION_CALL_WITHOUT_CALL_ID, "arguments": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": FUNCTION_CALL_WITHOUT_CALL_ID,
        },
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    (call,) = collected.message.content
    assert isinstance(call, ToolCall)
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    assert call.id == getattr(collected.chunks[0], "id", None)
    assert (call.name, call.arguments) == ("lookup", "{}")


_NO_ARGUMENTS_CALL = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "now"}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_responses_function_call_with_empty_arguments_has_an_empty_object(
    *, streamed: bool
) -> None:
    """R10.2: a completed call whose ``arguments`` are ``""`` (a tool without parameters,
    from some servers) has the JSON text ``{}`` as its arguments, as a Chat Completions or
    Anthropic call with none has; it was logged with ``""``, which is no JSON."""
    item = {**_NO_ARGUMENTS_CALL, "arguments": ""}
    response = {"object": "response", "status": "completed", "output": [item]}
    if streamed:
        events: list[dict[str, Any]] = [
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response},
        ]
        collected = await serve_once("responses", b"".join(map(typed_event, events)))
    else:
        collected = await serve_once("responses", json.dumps(response).encode(), JSON)
    assert collected.message.content == (ToolCall("c1", "now", "{}"),)


async def test_responses_whole_body_function_call_without_call_id_gets_an_id() -> None:
    """R10.2: a non-streamed function call without ``call_id`` gets a fresh id too."""
    body = {"status": "completed", "output": [FUNCTION_CALL_WITHOUT_CALL_ID]}
    collected = await serve_once("responses", json.dumps(body).encode(), JSON)
    (call,) = collected.message.content
    assert isinstance(call, ToolCall)
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)


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
    calls are two blocks. They were one block: the first call was lost."""
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
