"""What the decoders take for the client's tool calls, streamed and not.

A call the provider's server runs itself (Anthropic ``server_tool_use`` and
``mcp_tool_use``, a Responses ``web_search_call`` or ``mcp_call``) is left out,
as are the other blocks retinue does not model: the agent must not run it.
Arguments sent as an object holding a number JSON cannot carry are a malformed
response naming the call, on every API.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from retinue._content import Text, ToolCall
from retinue._stream import ToolCallDelta
from retinue.providers import ProviderStreamError

from .support import JSON, SSE, serve_once, sse_body

LOOKUP = ("toolu_1", "lookup", {"city": "Paris"})


def _typed(payload: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's ``type`` (Anthropic and Responses streams)."""
    return (
        b"event: " + payload["type"].encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"
    )


def _typed_body(events: list[dict[str, Any]]) -> bytes:
    return b"".join(map(_typed, events))


# --- Anthropic Messages: server tool blocks ----------------------------------------------

_SERVER_CALLS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "server_tool_use": (
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "title": "t", "url": "https://a.example"}],
        },
    ),
    "mcp_tool_use": (
        {
            "type": "mcp_tool_use",
            "id": "mcptoolu_1",
            "name": "echo",
            "server_name": "example-mcp",
            "input": {},
        },
        {
            "type": "mcp_tool_result",
            "tool_use_id": "mcptoolu_1",
            "is_error": False,
            "content": [{"type": "text", "text": "echoed"}],
        },
    ),
}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _anthropic_stream(call: dict[str, Any], result: dict[str, Any]) -> bytes:
    """A streamed answer in the shape the API sends: text, the server's call and its
    result, text, then one of the client's calls."""
    blank_text = {"type": "text", "text": ""}
    client_call = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": blank_text},
        _delta(0, {"type": "text_delta", "text": "Searching."}),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": call},
        _delta(1, {"type": "input_json_delta", "partial_json": ""}),
        _delta(1, {"type": "input_json_delta", "partial_json": '{"query":'}),
        _delta(1, {"type": "input_json_delta", "partial_json": '"x"}'}),
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": result},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3, "content_block": blank_text},
        _delta(3, {"type": "text_delta", "text": "Found it."}),
        {"type": "content_block_stop", "index": 3},
        {"type": "content_block_start", "index": 4, "content_block": client_call},
        _delta(4, {"type": "input_json_delta", "partial_json": '{"city":"Paris"}'}),
        {"type": "content_block_stop", "index": 4},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 30, "server_tool_use": {"web_search_requests": 1}},
        },
        {"type": "message_stop"},
    ]
    return _typed_body(events)


def _anthropic_whole(call: dict[str, Any], result: dict[str, Any]) -> bytes:
    content = [
        {"type": "text", "text": "Searching."},
        {**call, "input": {"query": "x"}},
        result,
        {"type": "text", "text": "Found it."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Paris"}},
    ]
    message = {
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 9, "output_tokens": 30},
    }
    return json.dumps(message).encode()


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("kind", sorted(_SERVER_CALLS))
async def test_anthropic_server_tool_call_is_not_a_client_tool_call(
    kind: str, *, streamed: bool
) -> None:
    """R10.2: a block the server runs itself streams ``input_json_delta`` like a
    ``tool_use`` but is not one of the client's calls: it is left out, as its result
    block is, and the client's own call beside it keeps its id, name and arguments.
    The stream does not make it a call named ``''`` with a minted id for the agent to run.
    """
    call, result = _SERVER_CALLS[kind]
    if streamed:
        collected = await serve_once("messages", _anthropic_stream(call, result))
    else:
        collected = await serve_once("messages", _anthropic_whole(call, result), JSON)
    *texts, lookup = collected.message.content
    assert texts == [Text("Searching."), Text("Found it.")]
    assert isinstance(lookup, ToolCall)
    assert (lookup.id, lookup.name, json.loads(lookup.arguments)) == LOOKUP
    calls = [c for c in collected.chunks if isinstance(c, ToolCallDelta)]
    # Only the client's call streamed: one block, after the two texts.
    assert {(c.index, c.id) for c in calls if c.id} == ({(2, "toolu_1")} if streamed else set())
    assert {c.index for c in calls} == ({2} if streamed else set())


async def test_anthropic_block_started_at_a_server_tool_block_index_is_malformed() -> None:
    """R10.3: a block started at the index of a server tool's block would have its
    deltas left out with that block; the stream is refused as malformed, as a block
    started twice at the index of a decoded block is."""
    call, _ = _SERVER_CALLS["server_tool_use"]
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 9}}},
        {"type": "content_block_start", "index": 0, "content_block": call},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        _delta(0, {"type": "text_delta", "text": "lost"}),
    ]
    with pytest.raises(ProviderStreamError, match="block 0 started twice") as caught:
        await serve_once("messages", _typed_body(events))
    assert caught.value.code == "MALFORMED_RESPONSE"


# --- Responses: items the server runs itself ---------------------------------------------

_SERVER_ITEMS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "web_search_call": (
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        [{"type": "response.web_search_call.searching", "item_id": "ws_1"}],
    ),
    "file_search_call": (
        {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["x"]},
        [{"type": "response.file_search_call.searching", "item_id": "fs_1"}],
    ),
    "code_interpreter_call": (
        {"type": "code_interpreter_call", "id": "ci_1", "code": "print(1)", "outputs": []},
        [
            {
                "type": "response.code_interpreter_call_code.delta",
                "item_id": "ci_1",
                "delta": "print(1)",
            }
        ],
    ),
    "mcp_call": (
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "docs",
            "name": "search",
            "arguments": '{"q":"x"}',
        },
        [{"type": "response.mcp_call_arguments.delta", "item_id": "mcp_1", "delta": '{"q":"x"}'}],
    ),
}

_RESPONSES_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_f",
    "name": "lookup",
    "arguments": '{"city":"Paris"}',
}


def _responses_stream(item: dict[str, Any], events: list[dict[str, Any]]) -> bytes:
    """The server's item with its own events at output 0, then a function call at 1."""
    opened = {**_RESPONSES_CALL, "arguments": ""}
    streamed: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *({**event, "output_index": 0} for event in events),
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.output_item.added", "output_index": 1, "item": opened},
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 1,
            "item_id": "fc_1",
            "delta": '{"city":"Paris"}',
        },
        {"type": "response.output_item.done", "output_index": 1, "item": _RESPONSES_CALL},
        {
            "type": "response.completed",
            "response": {"status": "completed", "output": [item, _RESPONSES_CALL]},
        },
    ]
    return _typed_body(streamed)


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("kind", sorted(_SERVER_ITEMS))
async def test_responses_server_tool_item_is_not_a_client_tool_call(
    kind: str, *, streamed: bool
) -> None:
    """R10.2: an output item the server runs itself is not a function call: it is left
    out, streamed or not, and the function call after it is kept."""
    item, events = _SERVER_ITEMS[kind]
    if streamed:
        collected = await serve_once("responses", _responses_stream(item, events))
    else:
        whole = {"status": "completed", "output": [item, _RESPONSES_CALL]}
        collected = await serve_once("responses", json.dumps(whole).encode(), JSON)
    assert collected.message.content == (ToolCall("call_f", "lookup", '{"city":"Paris"}'),)


# --- Arguments sent as an object -----------------------------------------------------------

_OUT_OF_RANGE = [b'{"a":1e400}', b'{"a":NaN}', b'{"a":[-Infinity]}']


def _anthropic_call_bodies(arguments: bytes) -> list[tuple[bytes, Any]]:
    """A ``tool_use`` whose input is *arguments*, whole and sent in its stream's start."""
    call = b'{"type":"tool_use","id":"toolu_1","name":"lookup","input":' + arguments + b"}"
    whole = (
        b'{"type":"message","role":"assistant","content":['
        + call
        + b'],"stop_reason":"tool_use","usage":{"input_tokens":9,"output_tokens":5}}'
    )
    start = _typed({"type": "message_start", "message": {"usage": {"input_tokens": 9}}})
    end = _typed_body(
        [
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
            {"type": "message_stop"},
        ]
    )
    opened = (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":' + call + b"}\n\n"
    )
    return [(whole, JSON), (start + opened + end, SSE)]


def _chat_call_bodies(arguments: bytes) -> list[tuple[bytes, Any]]:
    call = (
        b'{"index":0,"id":"toolu_1","type":"function",'
        b'"function":{"name":"lookup","arguments":' + arguments + b"}}"
    )
    streamed = sse_body(
        b'{"choices":[{"index":0,"delta":{"tool_calls":[' + call + b']},"finish_reason":null}]}',
        b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        b"[DONE]",
    )
    whole = (
        b'{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",'
        b'"content":null,"tool_calls":[' + call + b"]}}]}"
    )
    return [(whole, JSON), (streamed, SSE)]


def _responses_call_bodies(arguments: bytes) -> list[tuple[bytes, Any]]:
    call = (
        b'{"type":"function_call","id":"fc_1","call_id":"toolu_1","name":"lookup",'
        b'"arguments":' + arguments + b"}"
    )
    whole = b'{"status":"completed","output":[' + call + b"]}"
    done = (
        b'event: response.output_item.done\ndata: {"type":"response.output_item.done",'
        b'"output_index":0,"item":' + call + b"}\n\n"
    )
    end = _typed({"type": "response.completed", "response": {"status": "completed"}})
    return [(whole, JSON), (done + end, SSE)]


_BODIES = {
    "messages": _anthropic_call_bodies,
    "chat": _chat_call_bodies,
    "responses": _responses_call_bodies,
}


def _cases(arguments: list[bytes]) -> list[Any]:
    return [
        pytest.param(
            api, body, headers, id=f"{api}-{'whole' if headers is JSON else 'streamed'}-{n}"
        )
        for api, bodies in _BODIES.items()
        for n, case in enumerate(arguments)
        for body, headers in bodies(case)
    ]


@pytest.mark.parametrize(("api", "body", "headers"), _cases(_OUT_OF_RANGE))
async def test_arguments_object_holding_a_number_json_cannot_carry_is_malformed(
    api: str, body: bytes, headers: Any
) -> None:
    """R10.3: a call's input sent as an object holding NaN, Infinity or a number beyond
    a float (which Python's parser reads) cannot be written back as JSON: every adapter,
    streamed or not, refuses the response as malformed, naming the call. Anthropic's
    arguments read ``{"a": Infinity}``, text that is not JSON.
    """
    with pytest.raises(
        ProviderStreamError, match=r"arguments of tool call 'toolu_1' hold NaN"
    ) as caught:
        await serve_once(api, body, headers)
    assert caught.value.code == "MALFORMED_RESPONSE"


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        pytest.param(body, headers, id=f"{'whole' if headers is JSON else 'streamed'}-{name}")
        for name, value in [("string", b'"Paris"'), ("array", b'["Paris"]'), ("number", b"5")]
        for body, headers in _anthropic_call_bodies(value)
    ],
)
async def test_anthropic_tool_input_that_is_not_an_object_is_malformed(
    body: bytes, headers: Any
) -> None:
    """R10.3: a ``tool_use`` whose ``input`` is not an object is refused as malformed,
    naming the call, as Chat Completions and Responses refuse arguments of another type.
    It does not become ``{}``, which would run the call with no arguments.
    """
    with pytest.raises(ProviderStreamError, match=r"tool call 'toolu_1'") as caught:
        await serve_once("messages", body, headers)
    assert caught.value.code == "MALFORMED_RESPONSE"


@pytest.mark.parametrize(
    ("api", "body", "headers"), _cases(['{"city":"Zürich","n":[1,2.5]}'.encode()])
)
async def test_arguments_sent_as_an_object_are_kept_as_compact_json_text(
    api: str, body: bytes, headers: Any
) -> None:
    """R10.2: arguments sent as a JSON object are kept, as compact JSON text, by every
    adapter, the Responses adapter included (the call's arguments not left empty)."""
    collected = await serve_once(api, body, headers)
    assert collected.message.content == (
        ToolCall("toolu_1", "lookup", '{"city":"Zürich","n":[1,2.5]}'),
    )
