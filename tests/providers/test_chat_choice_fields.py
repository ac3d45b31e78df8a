"""Chat Completions choice fields of the wrong JSON type: a choice's ``index``, its
``delta``, the delta's ``tool_calls`` and a tool call's ``index``. Read as absent (or a
bool as an int) they would skip the choice (its text, or a ``length`` finish, lost), drop
the delta's text, leave a tool-calls finish without its calls, or join a fragment to
another call: each fails the stream as malformed, naming the field and its type.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from retinue._content import Text, ToolCall
from retinue._stream import MAX_TOKENS, Finish
from retinue.providers import ProviderStreamError

from .support import JSON, serve_once, sse_body

Event = dict[str, Any]


def _body(*chunks: Event) -> bytes:
    return sse_body(*(json.dumps(c).encode() for c in chunks), b"[DONE]")


def _choice(delta: object, finish: str | None = None, **fields: Any) -> Event:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, **fields}]}


CALL = {"index": 0, "id": "call_1", "type": "function"}

_CASES: dict[str, tuple[bytes, str]] = {
    **{
        f"choice-index-{name}": (
            _body(_choice({"content": "Hi"}), _choice({}, "length", index=value)),
            "a choice's index is of type " + type(value).__name__,
        )
        for name, value in [("string", "0"), ("bool", True), ("list", []), ("object", {})]
    },
    "delta-a-string": (
        _body(_choice({"content": "Hel"}), _choice("lo"), _choice({}, "stop")),
        "a choice's delta is of type str",
    ),
    "tool-calls-an-object": (
        _body(
            _choice({"tool_calls": {**CALL, "function": {"name": "f", "arguments": "{}"}}}),
            _choice({}, "tool_calls"),
        ),
        "a delta's tool_calls is of type dict",
    ),
    "tool-call-index-bool": (
        _body(
            _choice({"tool_calls": [{**CALL, "function": {"name": "f", "arguments": ""}}]}),
            _choice({"tool_calls": [{"index": True, "function": {"arguments": '{"x":1}'}}]}),
            _choice({}, "tool_calls"),
        ),
        "a tool call's index is of type bool",
    ),
}


@pytest.mark.parametrize(("body", "field"), list(_CASES.values()), ids=list(_CASES))
async def test_a_chat_choice_field_of_the_wrong_type_fails_the_stream(
    body: bytes, field: str
) -> None:
    """R10.3: the stream fails as MALFORMED_RESPONSE naming the field and its type."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("chat", body)
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert field in str(caught.value)


async def test_a_null_choice_index_reads_as_the_first_choice() -> None:
    """R10.3: a choice whose ``index`` is null is the first, as one without an index is:
    its ``length`` finish is kept, not read as a stop."""
    collected = await serve_once(
        "chat", _body(_choice({"content": "1."}), _choice({}, "length", index=None))
    )
    assert collected.message.content == (Text("1."),)
    assert collected.chunks[-1] == Finish(MAX_TOKENS)


async def test_null_delta_and_tool_calls_read_as_absent() -> None:
    """R10.6: a null ``delta`` or ``tool_calls`` carries nothing, as servers send them."""
    body = _body(_choice({"content": "Hi", "tool_calls": None}), _choice(None), _choice({}, "stop"))
    collected = await serve_once("chat", body)
    assert collected.message.content == (Text("Hi"),)


async def test_a_second_choice_is_left_out() -> None:
    """R10.6: a choice other than the first (``index`` 1) is an alternative, left out."""
    body = _body(
        _choice({"content": "Hi"}),
        _choice({"tool_calls": [{**CALL, "function": {"name": "f", "arguments": "{}"}}]}, index=1),
        _choice({}, "stop"),
    )
    collected = await serve_once("chat", body)
    assert collected.message.content == (Text("Hi"),)
    assert not any(isinstance(block, ToolCall) for block in collected.message.content)


async def test_a_whole_chat_body_with_a_null_choice_index_reads_as_the_first_choice() -> None:
    """R10.2: a response sent whole reads a ``null`` choice ``index`` as the first choice,
    as a stream does, where it was refused as having no first choice."""
    choice = {"index": None, "message": {"role": "assistant", "content": "Hi"}}
    body = json.dumps({"choices": [{**choice, "finish_reason": "stop"}]}).encode()
    collected = await serve_once("chat", body, headers=JSON)
    assert collected.message.content == (Text("Hi"),)
