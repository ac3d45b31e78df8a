"""Tool calls a stream never names: no API sends a function call without a name, so the
stream fails as malformed, naming the call, rather than handing the agent a call to a
tool named "" (or the real tool with the arguments of another fragment).

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from retinue._content import Text, ToolCall
from retinue.providers import ProviderStreamError

from ._wire_edge_kit import MESSAGE_START, typed_event
from .support import serve_once, sse_body

Event = dict[str, Any]


def _chat(*deltas: Event, finish: str = "tool_calls") -> bytes:
    chunks: list[Event] = [
        {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return sse_body(*(json.dumps(c).encode() for c in chunks), b"[DONE]")


def _call(**fields: Any) -> Event:
    return {"tool_calls": [fields]}


OPENING = {"index": 0, "id": "call_1", "type": "function"}

_CHAT_CASES = {
    "opening-fragment-lost": _chat(_call(index=0, function={"arguments": '{"city":"Oslo"}'})),
    "opening-at-another-index": _chat(
        _call(index=-1, id="call_1", type="function", function={"name": "f", "arguments": ""}),
        _call(index=0, function={"arguments": '{"x":1}'}),
    ),
    "name-a-number": _chat(_call(**OPENING, function={"name": 7, "arguments": "{}"})),
    "function-a-string": _chat(_call(**OPENING, function="lookup")),
}


@pytest.mark.parametrize("body", list(_CHAT_CASES.values()), ids=list(_CHAT_CASES))
async def test_a_chat_tool_call_never_named_fails_the_stream(body: bytes) -> None:
    """R10.3: a call left without a name fails MALFORMED_RESPONSE at the stream's end,
    naming the call and its block."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("chat", body)
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "was never named" in str(caught.value)


async def test_a_chat_tool_call_named_by_a_later_fragment_still_runs() -> None:
    """R10.6: the name may come after the id: the call keeps both, and its arguments."""
    body = _chat(
        _call(index=0, id="call_1", type="function", function={"arguments": ""}),
        _call(index=0, function={"name": "lookup", "arguments": "{}"}),
    )
    collected = await serve_once("chat", body)
    assert collected.message.content == (ToolCall("call_1", "lookup", "{}"),)


@pytest.mark.parametrize("entry", [None, {}], ids=["null-entry", "empty-entry"])
async def test_a_chat_tool_call_entry_carrying_nothing_is_left_out(entry: object) -> None:
    """R10.3: an entry of ``tool_calls`` with no id, no name and no arguments (``null``,
    ``{}``) opens no call: the answer is read without one, neither failed nor given a
    call to a tool named ""."""
    body = _chat({"content": "Hi"}, {"tool_calls": [entry]}, finish="stop")
    collected = await serve_once("chat", body)
    assert collected.message.content == (Text("Hi"),)


def _messages(*events: Event, stop: str = "tool_use") -> bytes:
    end: list[Event] = [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    return b"".join(map(typed_event, [MESSAGE_START, *events, *end]))


def _input(part: str, index: int | None = 0) -> Event:
    event: Event = {"type": "content_block_delta"}
    if index is not None:
        event["index"] = index
    event["delta"] = {"type": "input_json_delta", "partial_json": part}
    return event


def _tool_start(**block: Any) -> Event:
    content = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}, **block}
    return {"type": "content_block_start", "index": 0, "content_block": content}


_STOP = {"type": "content_block_stop", "index": 0}

_MESSAGES_CASES = {
    "start-lost": _messages(_input('{"city":"Oslo"}'), _STOP),
    "delta-without-index": _messages(
        _tool_start(), _input('{"city":'), _input('"Oslo"}', None), _STOP
    ),
    "block-type-none": _messages(_tool_start(type=None), _input("{}"), _STOP),
    "name-a-number": _messages(_tool_start(name=7), _STOP),
    "no-name": _messages(_tool_start(name=None), _input("{}"), _STOP),
}


@pytest.mark.parametrize("body", list(_MESSAGES_CASES.values()), ids=list(_MESSAGES_CASES))
async def test_an_anthropic_tool_call_never_named_fails_the_stream(body: bytes) -> None:
    """R10.3: an input delta for a block never started, or a tool_use block without a
    string name, fails MALFORMED_RESPONSE: the agent gets no call to a tool named ""."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", body)
    assert caught.value.code == "MALFORMED_RESPONSE"


async def test_an_anthropic_tool_use_without_a_name_is_named_at_the_end() -> None:
    """R10.3: the failure names the call and its block."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", _MESSAGES_CASES["no-name"])
    assert "tool call 'toolu_1' (block 0) was never named" in str(caught.value)


async def test_anthropic_text_deltas_without_a_start_stay_allowed() -> None:
    """R10.6: a delta-only stream of text still makes its block."""
    text = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}
    body = _messages({**text, "delta": {"type": "text_delta", "text": "Hi"}}, stop="end_turn")
    collected = await serve_once("messages", body)
    assert collected.message.content == (Text("Hi"),)


@pytest.mark.parametrize(
    ("api", "body", "provider"),
    [
        ("chat", _CHAT_CASES["opening-fragment-lost"], "openai"),
        ("messages", _MESSAGES_CASES["no-name"], "anthropic"),
    ],
    ids=["chat", "messages"],
)
async def test_a_failure_at_the_stream_end_names_whose_stream_it_was(
    api: str, body: bytes, provider: str
) -> None:
    """R10.3: a stream found malformed at its end says whose stream it was, as a failure
    at one of its events does."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, body)
    assert caught.value.message.startswith(f"{provider} stream, at its end: ")
