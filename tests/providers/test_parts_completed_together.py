"""A Responses message of two parts whose deltas carry no ``content_index``, the parts
completed together after all their deltas: each part's text comes once.

The events are those of ``responses_stream_text_after_function_outputs.json``, given a
second part as a compatible server streams it, and served verbatim by the in-process
mock server.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from retinue._content import Text
from retinue._stream import TextDelta

from ._wire_edge_kit import responses_body
from .support import completed_text, recorded_events, serve_once

Event = dict[str, Any]
_TEXT = "responses_stream_text_after_function_outputs.json"
_SECOND = " That is all."
_DELTA = "response.output_text.delta"
_PART_DONE = "response.content_part.done"
_TEXT_DONE = "response.output_text.done"


def _with_text(done: Event, index: int, text: str) -> Event:
    """*done*, an ``output_text.done`` or ``content_part.done``, as part *index*'s, of *text*."""
    if "part" in done:
        return {**done, "content_index": index, "part": {**done["part"], "text": text}}
    return {**done, "content_index": index, "text": text}


def _completed_together(events: list[Event], first_text: str) -> list[Event]:
    """Two parts streamed one after the other by deltas without ``content_index``, then
    completed together (``output_text.done`` and ``content_part.done`` of each), the
    first part's complete text being *first_text*."""
    dones = [e for e in events if e["type"] in (_TEXT_DONE, _PART_DONE)]
    out: list[Event] = []
    for event in events:
        if event["type"] == _DELTA:
            out.append({k: v for k, v in event.items() if k != "content_index"})
        elif event["type"] == "response.output_item.done":
            out.append({**out[-1], "delta": _SECOND})
            out.extend(_with_text(done, 0, first_text) for done in dones)
            out.extend(_with_text(done, 1, _SECOND) for done in dones)
            first = {**event["item"]["content"][0], "text": first_text}
            second = {"type": "output_text", "annotations": [], "text": _SECOND}
            out.append({**event, "item": {**event["item"], "content": [first, second]}})
        elif event["type"] not in (_TEXT_DONE, _PART_DONE):
            out.append(event)
    return out


@pytest.mark.parametrize("shape", ["as streamed", "a full stop longer", "trimmed"])
async def test_parts_completed_together_after_their_deltas_come_once(
    shape: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: the second part's deltas come before the first part's ``content_part.done``;
    its own ``content_part.done`` adds nothing, the deltas having streamed it, so its text
    does not come a second time: the deltas are not all counted to the part completed
    first. The first part's complete text differing from its deltas (a full stop longer,
    one character shorter) changes nothing."""
    events = recorded_events(_TEXT)
    answer = completed_text(events)
    first = {"as streamed": answer, "a full stop longer": answer + ".", "trimmed": answer[:-1]}
    edited = _completed_together(events, first[shape])
    collected = await serve_once("responses", responses_body(edited))
    assert collected.message.content == (Text(answer + _SECOND),)
    streamed = "".join(c.text for c in collected.chunks if isinstance(c, TextDelta))
    assert streamed == answer + _SECOND


def _two_parts(deltas: list[str], first: str, second: str) -> list[Event]:
    """A message whose *deltas*, without ``content_index``, all come before the two parts'
    ``content_part.done``, of *first* and *second*."""
    done = {"type": _PART_DONE, "item_id": "m", "output_index": 0}
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "m"}},
        *({"type": _DELTA, "item_id": "m", "output_index": 0, "delta": d} for d in deltas),
        {**done, "content_index": 0, "part": {"type": "output_text", "text": first}},
        {**done, "content_index": 1, "part": {"type": "output_text", "text": second}},
        {"type": "response.completed", "response": {"status": "completed", "output": []}},
    ]


@pytest.mark.parametrize(
    ("deltas", "texts", "expected"),
    [
        (["Yes. ", "Yes. "], ("Yes. ", "Yes. "), ["Yes. Yes. "]),
        (["Yes. "], ("Yes. ", "Yes. "), ["Yes. ", "Yes. "]),
        (["\nYes.\n", "\nNo.\n"], ("Yes.", "No."), ["\nYes.\n\nNo.\n"]),
        (["No."], ("Yes. ", "No."), ["No.", "Yes. "]),
    ],
    ids=[
        "both streamed",
        "second sent only complete",
        "neither text as streamed",
        "first sent only complete",
    ],
)
async def test_parts_completed_together_are_told_apart_by_their_place(
    deltas: list[str], texts: tuple[str, str], expected: list[str], autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: a part whose text repeats the first's is streamed when the deltas hold it
    after the first, and sent only complete when they end with the first: it is kept, not
    dropped for its text being streamed already. A first part sent only complete is kept
    once the second's text is found where it would have begun, the deltas not taken for
    it. Where no part's complete text reads as the deltas (each trimmed), the
    deltas are taken to hold them both."""
    events = _two_parts(deltas, *texts)
    collected = await serve_once("responses", responses_body(events))
    assert [b.text for b in collected.message.content if isinstance(b, Text)] == expected


async def test_parts_of_one_text_sent_only_complete_are_each_kept(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: two parts of one text, each given only by its ``content_part.done`` (no
    delta, no ``output_item.done``), are two parts, the second not taken for a block of
    deltas holding it and dropped."""
    events = [event for event in _two_parts([], "Yes. ", "Yes. ") if event["type"] != _DELTA]
    collected = await serve_once("responses", responses_body(events))
    assert [b.text for b in collected.message.content if isinstance(b, Text)] == ["Yes. "] * 2
