"""Responses calls whose ``output_item.added`` carries arguments: held until the call ends,
replaced by the deltas or the completed item that follow.

The API adds each call with no arguments and streams them in deltas; a
compatible server may add one whole, or with ``{}``, and then stream them too.
Each body is served verbatim by the in-process mock server (a ``RawReply``).
"""

from __future__ import annotations

from typing import Any

import pytest

from retinue._content import ToolCall
from retinue._stream import ToolCallDelta
from retinue.providers import ProviderStreamError

from ._wire_edge_kit import typed_event
from .support import serve_once

ARGUMENTS = '{"city":"Oslo"}'
OSLO_CALL = (ToolCall("call_1", "lookup", ARGUMENTS),)


def _call(arguments: object) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": arguments,
    }


def _added(arguments: object) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": 0, "item": _call(arguments)}


def _delta(text: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.delta",
        "output_index": 0,
        "item_id": "fc_1",
        "delta": text,
    }


COMPLETED: dict[str, Any] = {
    "type": "response.completed",
    "response": {"status": "completed", "output": []},
}


async def _served(*events: dict[str, Any]) -> tuple[tuple[object, ...], list[str]]:
    """The message's content and each call chunk's arguments."""
    collected = await serve_once("responses", b"".join(map(typed_event, events)))
    deltas = [c.arguments_delta for c in collected.chunks if isinstance(c, ToolCallDelta)]
    return collected.message.content, deltas


@pytest.mark.parametrize(
    "added",
    ["{}", {}, ARGUMENTS, {"city": "Oslo"}, [1]],
    ids=["empty-text", "empty-object", "whole-text", "whole-object", "a-list"],
)
async def test_deltas_after_arguments_added_with_the_call_replace_them(added: object) -> None:
    """R10.2: deltas that stream a call added with arguments are its arguments alone,
    not run together with the added ones into no JSON (``{}{"city":"Oslo"}``), and a
    list added is not refused, as the deltas replace it."""
    content, deltas = await _served(_added(added), _delta('{"city":'), _delta('"Oslo"}'), COMPLETED)
    assert content == OSLO_CALL
    assert deltas == ["", '{"city":', '"Oslo"}']


async def test_arguments_added_with_the_call_are_given_when_the_response_ends() -> None:
    """R10.2: a call added whole that no delta or completed item follows keeps the
    arguments it was added with, in a delta before its end."""
    content, deltas = await _served(_added(ARGUMENTS), COMPLETED)
    assert content == OSLO_CALL
    assert deltas == ["", ARGUMENTS]


async def test_arguments_added_with_the_call_are_given_when_it_completes_without_any() -> None:
    """R10.2: a completed item that leaves out the arguments ends the call with those
    it was added with; the completed item's own arguments win when it has some."""
    done = {"type": "response.output_item.done", "output_index": 0}
    bare = {key: value for key, value in _call(None).items() if key != "arguments"}
    content, _ = await _served(_added(ARGUMENTS), {**done, "item": bare}, COMPLETED)
    assert content == OSLO_CALL
    content, _ = await _served(
        _added('{"city":"Rome"}'), {**done, "item": _call(ARGUMENTS)}, COMPLETED
    )
    assert content == OSLO_CALL


async def test_a_list_added_as_the_arguments_of_a_call_nothing_replaces_is_refused() -> None:
    """R10.2: arguments of no JSON type are refused when they are the call's, as a
    completed item's are, not run as ``{}``."""
    with pytest.raises(ProviderStreamError, match="of type list") as caught:
        await _served(_added([1]), COMPLETED)
    assert caught.value.code == "MALFORMED_RESPONSE"
