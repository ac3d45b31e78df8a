"""Responses items of a server that sends neither ``output_index`` nor ``output_item.added``:
its deltas name their item only by ``item_id``, and each ``output_item.done`` finds them.

Each body is served verbatim by the in-process mock server, so the adapter reads it
through its real HTTP path.
"""

from __future__ import annotations

from typing import Any

from retinue._content import Text, ToolCall

from ._wire_edge_kit import typed_event
from .support import serve_once

_COMPLETED = {"type": "response.completed", "response": {"status": "completed"}}


def _call(item_id: str, call_id: str, arguments: str) -> list[dict[str, Any]]:
    """A call streamed in two deltas naming their item, then completed: never added."""
    item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": "lookup"}
    middle = len(arguments) // 2
    return [
        *(
            {"type": "response.function_call_arguments.delta", "item_id": item_id, "delta": part}
            for part in (arguments[:middle], arguments[middle:])
        ),
        {"type": "response.output_item.done", "item": {**item, "arguments": arguments}},
    ]


async def test_calls_streamed_before_any_item_event_are_each_one_call() -> None:
    """R10.2: each call is one block, named by its complete item; the first call's deltas,
    coming before any item event names their item_id, make no nameless call of their
    own, which the agent would run beside the real one."""
    events: list[dict[str, Any]] = [
        *_call("fc_1", "call_a", '{"city":"Oslo"}'),
        *_call("fc_2", "call_b", '{"city":"Rome"}'),
        _COMPLETED,
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (
        ToolCall("call_a", "lookup", '{"city":"Oslo"}'),
        ToolCall("call_b", "lookup", '{"city":"Rome"}'),
    )


async def test_a_message_part_completed_before_its_item_event_comes_once() -> None:
    """R10.2: a part that streamed no delta (its content_part.done gave it) is the same part
    in the message completed after it, not given a second time as the message's own."""
    parts: list[dict[str, Any]] = [
        {"type": "output_text", "text": text, "annotations": []} for text in ("One.", "Two.")
    ]
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": parts}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "content_index": 0,
            "delta": "One.",
        },
        *(
            {
                "type": "response.content_part.done",
                "item_id": "msg_1",
                "content_index": index,
                "part": part,
            }
            for index, part in enumerate(parts)
        ),
        {"type": "response.output_item.done", "item": message},
        _COMPLETED,
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (Text("One."), Text("Two."))


async def test_a_second_message_after_the_first_is_completed_is_a_block_of_its_own() -> None:
    """R10.2: the deltas after the first item's done name another item: they start its
    block, not going on in the completed one's."""

    def message(item_id: str, text: str) -> list[dict[str, Any]]:
        item = {"type": "message", "id": item_id, "role": "assistant"}
        done = {**item, "content": [{"type": "output_text", "text": text, "annotations": []}]}
        delta = {"item_id": item_id, "content_index": 0, "delta": text}
        return [
            {"type": "response.output_text.delta", **delta},
            {"type": "response.output_item.done", "item": done},
        ]

    events = [*message("msg_1", "Hello."), *message("msg_2", "Bye."), _COMPLETED]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (Text("Hello."), Text("Bye."))


async def test_a_call_whose_deltas_name_its_call_id_is_one_call() -> None:
    """R10.2: a server may name a call's deltas by its call id, not its item id; the
    completed item finds the block of that id, making no second, nameless call."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "lookup"}
    arguments = '{"city":"Oslo"}'
    events: list[dict[str, Any]] = [
        *(
            {"type": "response.function_call_arguments.delta", "item_id": "call_a", "delta": d}
            for d in (arguments[:5], arguments[5:])
        ),
        {"type": "response.output_item.done", "item": {**item, "arguments": arguments}},
        _COMPLETED,
    ]
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    assert collected.message.content == (ToolCall("call_a", "lookup", arguments),)
