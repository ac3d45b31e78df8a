"""A Responses message whose parts arrive complete, in the recorded stream's event shapes,
beside deltas keyed otherwise than its complete item: each part's text comes once.

The events are those of ``responses_stream_text_after_function_outputs.json``,
edited as compatible servers send them, and served verbatim by the in-process
mock server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from retinue._content import Text
from retinue._stream import TextDelta
from retinue.loop._assembler import BlockAssembler
from retinue.providers import ProviderStreamError
from retinue.providers._openai_responses_stream import ResponsesStreamDecoder
from retinue.providers._sse import SseEvent

from ._wire_edge_kit import responses_body
from .support import completed_text, recorded_events, serve_once

Event = dict[str, Any]
_TEXT = "responses_stream_text_after_function_outputs.json"
_SECOND = " That is all."
_DELTA = "response.output_text.delta"


def _without_deltas(events: list[Event]) -> list[Event]:
    return [e for e in events if e["type"] != _DELTA]


def _counted_from_one(events: list[Event]) -> list[Event]:
    """Parts counted from 1 in the stream's events (the complete item counts them from 0)."""
    return [
        {**e, "content_index": e["content_index"] + 1} if "content_index" in e else e
        for e in events
    ]


def _items_without_output_index(events: list[Event]) -> list[Event]:
    items = ("response.output_item.added", "response.output_item.done")
    return [
        {k: v for k, v in e.items() if k != "output_index"} if e["type"] in items else e
        for e in events
    ]


@pytest.mark.parametrize(
    "edit",
    [_counted_from_one, _items_without_output_index],
    ids=["parts-counted-from-one", "items-without-output-index"],
)
async def test_a_part_sent_only_complete_comes_once_when_its_item_is_keyed_otherwise(
    edit: Callable[[list[Event]], list[Event]],
) -> None:
    """R10.2: a part that streamed no delta, given by its ``content_part.done``, is the same
    part in the ``output_item.done`` after it, though the two are keyed otherwise, not
    given a second time as the item's own."""
    events = recorded_events(_TEXT)
    collected = await serve_once("responses", responses_body(edit(_without_deltas(events))))
    assert collected.message.content == (Text(completed_text(events)),)
    streamed = "".join(c.text for c in collected.chunks if isinstance(c, TextDelta))
    assert streamed == completed_text(events)


def _without_part_index(events: list[Event]) -> list[Event]:
    """Deltas without ``content_index``, as a server that leaves it out sends them."""
    return [
        {k: v for k, v in e.items() if k != "content_index"} if e["type"] == _DELTA else e
        for e in events
    ]


def _with_a_second_part(events: list[Event], *, part_done: bool) -> list[Event]:
    """The recorded message given a second part that streams no delta."""
    second = {"type": "output_text", "annotations": [], "logprobs": [], "text": _SECOND}
    out: list[Event] = []
    for recorded in events:
        kind = recorded["type"]
        event: Event = json.loads(json.dumps(recorded))
        if kind in ("response.output_item.done", "response.completed"):
            items = [event["item"]] if "item" in event else event["response"]["output"]
            for item in items:
                item["content"].append(second)
        if kind == "response.output_item.done" and part_done:
            where = {"item_id": event["item"]["id"], "output_index": 0, "content_index": 1}
            out.append({"type": "response.content_part.done", **where, "part": second})
        out.append(event)
    return out


@pytest.mark.parametrize("part_done", [True, False], ids=["in-its-part-done", "in-its-item"])
@pytest.mark.parametrize(
    "edit", [_without_part_index, _counted_from_one], ids=["no-part-index", "counted-from-one"]
)
async def test_a_part_sent_only_complete_is_kept_beside_deltas_keyed_otherwise(
    edit: Callable[[list[Event]], list[Event]], part_done: bool
) -> None:
    """R10.2: deltas keyed otherwise than the complete item (no ``content_index``, or parts
    counted from 1) stream a message's first part; its second, sent only complete, still
    comes, after it, the block of those deltas taken neither for the whole message nor for
    the second part, which would lose it."""
    events = recorded_events(_TEXT)
    edited = edit(_with_a_second_part(events, part_done=part_done))
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == (Text(completed_text(events)), Text(_SECOND))
    streamed = "".join(c.text for c in collected.chunks if isinstance(c, TextDelta))
    assert streamed == completed_text(events) + _SECOND


async def test_parts_streamed_without_indices_come_once_in_a_message_of_two() -> None:
    """R10.2: deltas without ``content_index`` or ``output_index`` stream both parts of a
    message into one block; neither each part's ``content_part.done`` nor its item, which
    have an ``output_index``, repeat them: a block keyed by that ``output_index`` is not
    the only one taken for the whole, which would give the second part twice."""
    events = _with_a_second_part(recorded_events(_TEXT), part_done=True)
    second_done = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "response.content_part.done" and e["content_index"] == 1
    )
    item_id = events[second_done]["item_id"]
    events.insert(second_done, {"type": _DELTA, "item_id": item_id, "delta": _SECOND})
    unindexed = [
        {k: v for k, v in e.items() if k not in ("output_index", "content_index")}
        if e["type"] == _DELTA
        else e
        for e in events
    ]
    collected = await serve_once("responses", responses_body(unindexed))
    answer = completed_text(events) + _SECOND
    assert collected.message.content == (Text(answer),)
    assert "".join(c.text for c in collected.chunks if isinstance(c, TextDelta)) == answer


def _completed_with_a_full_stop(events: list[Event]) -> list[Event]:
    """The message's complete text, in every event that gives it, ends with a full stop
    its deltas did not stream."""
    text = completed_text(events)
    return [
        json.loads(json.dumps(e).replace(json.dumps(text), json.dumps(text + "."))) for e in events
    ]


async def test_a_part_whose_complete_text_differs_from_its_deltas_comes_once() -> None:
    """R10.2: deltas without ``content_index`` stream a part whose complete text, in its
    ``content_part.done``, has a full stop more: the block is taken to hold the part, as
    its ``output_item.done`` takes it, so the whole answer does not come a second time
    for the part's text being nowhere in the block."""
    events = recorded_events(_TEXT)
    edited = _completed_with_a_full_stop(_without_part_index(events))
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == (Text(completed_text(events)),)
    streamed = "".join(c.text for c in collected.chunks if isinstance(c, TextDelta))
    assert streamed == completed_text(events)


async def test_a_part_in_its_part_done_alone_is_kept_beside_deltas_without_a_part_index() -> None:
    """R10.2: beside deltas without ``content_index``, a second part that only its
    ``content_part.done`` gives (no ``output_item.done`` follows) still comes, once, not
    left for an item event that never comes."""
    events = recorded_events(_TEXT)
    edited = _without_part_index(_with_a_second_part(events, part_done=True))
    edited = [e for e in edited if e["type"] != "response.output_item.done"]
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == (Text(completed_text(events)), Text(_SECOND))
    streamed = "".join(c.text for c in collected.chunks if isinstance(c, TextDelta))
    assert streamed == completed_text(events) + _SECOND


def _decoded_parts(events: list[Event]) -> list[str]:
    """The text blocks the Responses decoder makes of *events*, assembled."""
    decoder, assembler = ResponsesStreamDecoder(), BlockAssembler()
    for event in events:
        for chunk in decoder.feed(SseEvent(event["type"], json.dumps(event).encode())):
            assembler.feed(chunk)
    for chunk in decoder.close():
        assembler.feed(chunk)
    return [block.text for block in assembler.message().content if isinstance(block, Text)]


def _two_parts(first_complete: str, *, item_done: bool, repeat: bool = False) -> list[Event]:
    """Deltas without a content_index stream part 0; part 1 comes only complete."""
    item = {"id": "m", "type": "message", "content": []}
    first = {"type": "output_text", "text": first_complete}
    second = {"type": "output_text", "text": _SECOND}
    done = "response.content_part.done"
    events: list[Event] = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": _DELTA, "item_id": "m", "output_index": 0, "delta": "Hello "},
        {"type": _DELTA, "item_id": "m", "output_index": 0, "delta": "world"},
        {"type": done, "item_id": "m", "output_index": 0, "content_index": 0, "part": first},
    ]
    events += events[-1:] if repeat else []
    events.append(
        {"type": done, "item_id": "m", "output_index": 0, "content_index": 1, "part": second}
    )
    if item_done:
        whole = {**item, "content": [first, second]}
        events.append({"type": "response.output_item.done", "output_index": 0, "item": whole})
    events.append({"type": "response.completed", "response": {"status": "completed", "output": []}})
    return events


@pytest.mark.parametrize("item_done", [True, False], ids=["item done", "no item done"])
@pytest.mark.parametrize("first", ["Hello world", "Hello worl", "Hello world."])
def test_a_part_sent_only_complete_after_streamed_deltas_is_kept_however_the_first_reads(
    first: str, item_done: bool
) -> None:
    """R10.6: a second part sent only in its content_part.done, after deltas without a
    content_index streamed the first, is kept when the first's complete text differs from
    its deltas (trimmed, a full stop more), not taken as streamed and lost."""
    assert _decoded_parts(_two_parts(first, item_done=item_done)) == ["Hello world", _SECOND]


def test_a_repeated_content_part_done_beside_unindexed_deltas_adds_nothing() -> None:
    """R10.6: a server sending a part's content_part.done twice does not double it."""
    events = _two_parts("Hello world", item_done=False, repeat=True)
    assert _decoded_parts(events) == ["Hello world", _SECOND]


def test_a_content_part_done_naming_its_item_by_no_string_is_read() -> None:
    """R10.6: an item_id that is no string (an object) is read as no id, so no TypeError
    (unhashable) from building the block's key of it comes out of the stream."""
    done = {
        "type": "response.content_part.done",
        "item_id": {"id": "m"},
        "output_index": 0,
        "content_index": 0,
        "part": {"type": "output_text", "text": "Hi"},
    }
    completed = {"type": "response.completed", "response": {"status": "completed", "output": []}}
    assert _decoded_parts([done, completed]) == ["Hi"]


def _parts_completed_out_of_order(events: list[Event], *, second_streamed: bool) -> list[Event]:
    """The recorded message given a second part, whose ``content_part.done`` comes before
    the first part's; its deltas, when it has some, follow the first part's."""
    out = _with_a_second_part(events, part_done=True)
    first, second = (i for i, e in enumerate(out) if e["type"] == "response.content_part.done")
    out[first], out[second] = out[second], out[first]
    if second_streamed:
        item_id = out[first]["item_id"]
        delta = {"type": _DELTA, "item_id": item_id, "output_index": 0, "delta": _SECOND}
        out.insert(first, delta)
    return out


@pytest.mark.parametrize("item_done", [True, False], ids=["item done", "no item done"])
@pytest.mark.parametrize("second_streamed", [True, False], ids=["both streamed", "first streamed"])
async def test_parts_completed_out_of_order_beside_unindexed_deltas_come_once(
    second_streamed: bool, item_done: bool
) -> None:
    """R10.6: a message's second part completed (``content_part.done``) before its first,
    beside deltas without ``content_index``, adds neither part a second time, and the
    second still comes when only its complete part gives it. The deltas are not all
    counted to the part completed first, which would take the first as sent only complete
    and give it twice."""
    events = recorded_events(_TEXT)
    edited = _without_part_index(
        _parts_completed_out_of_order(events, second_streamed=second_streamed)
    )
    if not item_done:
        edited = [e for e in edited if e["type"] != "response.output_item.done"]
    collected = await serve_once("responses", responses_body(edited))
    answer = completed_text(events)
    expected = (Text(answer + _SECOND),) if second_streamed else (Text(answer), Text(_SECOND))
    assert collected.message.content == expected
    streamed = "".join(c.text for c in collected.chunks if isinstance(c, TextDelta))
    assert streamed == answer + _SECOND


async def test_a_part_streamed_after_its_content_part_done_is_refused() -> None:
    """R10.3: a part whose ``content_part.done`` comes before its deltas is refused as
    malformed, naming the block, rather than given twice: its complete text opens the
    block, and the deltas would run on from it."""
    events = recorded_events(_TEXT)
    done = next(e for e in events if e["type"] == "response.content_part.done")
    first_delta = next(i for i, e in enumerate(events) if e["type"] == _DELTA)
    edited = [e for e in events if e is not done]
    edited.insert(first_delta, done)
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("responses", responses_body(edited))
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "came after the block ended" in str(caught.value)


@pytest.mark.parametrize("empty", ["", None], ids=["empty", "null"])
async def test_an_empty_delta_after_a_parts_content_part_done_adds_nothing(
    empty: str | None,
) -> None:
    """R10.3: a delta of no text for a part sent only complete (its ``content_part.done``
    ended its block) cannot give it twice: it adds nothing and is not refused as
    malformed, as a delta with text is."""
    events = recorded_events(_TEXT)
    stray = {**next(e for e in events if e["type"] == _DELTA), "delta": empty}
    complete_only = [e for e in events if e["type"] != _DELTA]
    done = next(e for e in complete_only if e["type"] == "response.content_part.done")
    complete_only.insert(complete_only.index(done) + 1, stray)
    collected = await serve_once("responses", responses_body(complete_only))
    plain = await serve_once("responses", responses_body(events))
    assert collected.message.content == plain.message.content
