"""Adapters against bodies that compatible servers and proxies send but OpenAI/Anthropic do not.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import trio

from retinue._content import Reasoning, Text, ToolCall
from retinue._stream import STOP, Errored, OtherFinish, TextDelta, ToolCallDelta, Usage
from retinue.providers import (
    ProviderConnectionError,
    ProviderError,
    ProviderStreamError,
    RetryPolicy,
)
from retinue.providers.mock import EchoPolicy, MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel

from .support import JSON, SSE, Collected, collect, make_request, mock_adapter, serve_once, sse_body

OPENAI_ERROR = (
    b'{"error":{"message":"upstream overloaded","type":"server_error","code":"server_error"}}'
)
ANTHROPIC_ERROR = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'


@pytest.mark.parametrize(
    ("api", "body", "code"),
    [
        ("chat", OPENAI_ERROR, "server_error"),
        ("responses", OPENAI_ERROR, "server_error"),
        ("messages", ANTHROPIC_ERROR, "overloaded_error"),
    ],
    ids=["chat", "responses", "messages"],
)
async def test_json_error_body_with_status_200_raises_typed_stream_error(
    api: str, body: bytes, code: str
) -> None:
    """R10.3: an error object sent with status 200 (some proxies) raises, not an empty success."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, body, JSON)
    assert caught.value.code == code
    assert caught.value.retryable
    assert "overloaded" in str(caught.value).lower()


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("chat", b'{"object":"list","data":[]}'),
        ("chat", b'{"object":"chat.completion","choices":[]}'),
        ("responses", b'{"object":"response","status":"completed"}'),
        ("messages", b'{"type":"message","role":"assistant","stop_reason":"end_turn"}'),
    ],
    ids=["chat-list", "chat-no-choices", "responses", "messages"],
)
async def test_json_body_without_the_api_shape_raises_malformed(api: str, body: bytes) -> None:
    """R10.3: a JSON 200 body with no choices / output / content is a malformed response."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, body, JSON)
    assert caught.value.code == "MALFORMED_RESPONSE"


CHAT_CACHED_OVER_PROMPT = sse_body(
    b'{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}',
    b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,'
    b'"prompt_tokens_details":{"cached_tokens":8}}}',
    b"[DONE]",
)
RESPONSES_CACHED_OVER_INPUT = (
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
    b'"output_index":0,"content_index":0,"delta":"hi"}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":'
    b'{"status":"completed","usage":{"input_tokens":5,"output_tokens":3,'
    b'"input_tokens_details":{"cached_tokens":8}}}}\n\n'
)


@pytest.mark.parametrize(
    ("api", "body"),
    [("chat", CHAT_CACHED_OVER_PROMPT), ("responses", RESPONSES_CACHED_OVER_INPUT)],
    ids=["chat", "responses"],
)
async def test_usage_with_more_cached_than_input_tokens_clamps_at_zero(
    api: str, body: bytes
) -> None:
    """R10.5: uncached input is never negative, even when a server over-reports cached tokens."""
    collected = await serve_once(api, body)
    assert collected.assembler.usage == Usage(0, 3, 8)
    assert collected.message.content == (Text("hi"),)


async def test_usage_counts_sent_as_integral_floats_are_read() -> None:
    """R10.5: ``"prompt_tokens": 5.0`` (some servers) counts 5 input tokens, not 0."""
    body = CHAT_CACHED_OVER_PROMPT.replace(b'"prompt_tokens":5', b'"prompt_tokens":5.0')
    collected = await serve_once("chat", body.replace(b'"cached_tokens":8', b'"cached_tokens":1.0'))
    assert collected.assembler.usage == Usage(4, 3, 1)


def _unindexed_call(call_id: str | None, name: str | None, arguments: str) -> bytes:
    call: dict[str, Any] = {"function": {"arguments": arguments}}
    if call_id is not None:
        call.update(id=call_id, type="function")
        call["function"]["name"] = name
    delta = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
    return json.dumps(delta).encode()


async def test_chat_tool_calls_without_index_are_separate_calls() -> None:
    """R10.2: deltas without ``index`` (some compatible servers) split calls at each new id."""
    body = sse_body(
        _unindexed_call("call_a", "lookup", '{"city":'),
        _unindexed_call(None, None, '"Oslo"}'),
        _unindexed_call("call_b", "lookup", '{"city":"Lima"}'),
        b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        b"[DONE]",
    )
    collected = await serve_once("chat", body)
    assert collected.message.content == (
        ToolCall("call_a", "lookup", '{"city":"Oslo"}'),
        ToolCall("call_b", "lookup", '{"city":"Lima"}'),
    )
    assert collected.assembler.finish.kind == "tool-calls"


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_shard_header_is_not_sent_through_a_caller_transport(api: str) -> None:
    """The session id in the internal shard header never reaches the provider."""
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with mock_adapter(api, server) as model:
            await collect(model, make_request("hi", session_id="secret-session-42"))
    headers = server.calls[0].headers
    assert not [name for name in headers if "retinue" in name]
    assert "secret-session-42" not in headers.values()


def _indexed_call(call_id: str, arguments: str) -> bytes:
    call = {"index": 0, "id": call_id, "type": "function"}
    call["function"] = {"name": "lookup", "arguments": arguments}  # type: ignore[assignment]
    delta = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
    return json.dumps(delta).encode()


async def test_chat_tool_calls_sharing_one_index_are_separate_calls() -> None:
    """R10.2: servers that give every call index 0 (Ollama, some gateways) still get one
    block per call: a new id at an index starts a new call.
    """
    body = sse_body(
        _indexed_call("call_a", '{"city":"Oslo"}'),
        _indexed_call("call_b", '{"city":"Lima"}'),
        b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        b"[DONE]",
    )
    collected = await serve_once("chat", body)
    assert collected.message.content == (
        ToolCall("call_a", "lookup", '{"city":"Oslo"}'),
        ToolCall("call_b", "lookup", '{"city":"Lima"}'),
    )


def _fragment(name: str | None, arguments: str, **call: Any) -> bytes:
    function = {"arguments": arguments} if name is None else {"name": name, "arguments": arguments}
    delta = {"tool_calls": [{**call, "function": function}]}
    return json.dumps({"choices": [{"index": 0, "delta": delta}]}).encode()


_TOOL_CALLS_END = b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}'


@pytest.mark.parametrize(
    "where", [{"index": 0, "id": ""}, {"index": 0}, {}], ids=["index-0-empty-id", "index-0", "bare"]
)
async def test_chat_whole_calls_with_no_id_at_one_index_are_separate_calls(
    where: dict[str, Any],
) -> None:
    """R10.2: Gemini's endpoint sends each parallel call whole, all at index 0 with an empty
    id: each is its own call. They were merged into one call, its arguments run together
    and the first call's name lost."""
    body = sse_body(
        _fragment("get_weather", '{"city":"London"}', **where),
        _fragment("get_time", '{"tz":"UTC"}', **where),
        _TOOL_CALLS_END,
        b"[DONE]",
    )
    collected = await serve_once("chat", body)
    calls = collected.message.content
    assert [(call.name, call.arguments) for call in calls] == [  # type: ignore[union-attr]
        ("get_weather", '{"city":"London"}'),
        ("get_time", '{"tz":"UTC"}'),
    ]
    assert len({call.id for call in calls}) == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "number", ["1e400", "NaN", "-Infinity"], ids=["float-overflow", "nan", "infinity"]
)
async def test_chat_whole_calls_with_no_id_are_separate_when_one_holds_a_number_json_cannot_write(
    number: str,
) -> None:
    """R10.2, R9.6: Gemini's parallel calls are told apart when the first one's arguments
    hold a number JSON cannot write back: they are still a whole object, kept as they came.
    The calls were merged into one, its arguments run together and the second name lost."""
    first = '{"lat":' + number + "}"
    body = sse_body(
        _fragment("get_weather", first, index=0, id=""),
        _fragment("get_time", '{"tz":"UTC"}', index=0, id=""),
        _TOOL_CALLS_END,
        b"[DONE]",
    )
    collected = await serve_once("chat", body)
    calls = collected.message.content
    assert [(call.name, call.arguments) for call in calls] == [  # type: ignore[union-attr]
        ("get_weather", first),
        ("get_time", '{"tz":"UTC"}'),
    ]


@pytest.mark.parametrize("last", ["", "\n", " "], ids=["empty", "newline", "space"])
async def test_chat_a_tool_named_in_every_fragment_of_one_call_stays_one_call(last: str) -> None:
    """R10.2: a server naming the tool in each fragment sends it before the arguments are
    whole, and after them can only add whitespace: one call, not several."""
    body = sse_body(
        _fragment("lookup", '{"city":', index=0, id="call_a"),
        _fragment("lookup", '"Oslo"}', index=0),
        _fragment("lookup", last, index=0),
        _TOOL_CALLS_END,
        b"[DONE]",
    )
    collected = await serve_once("chat", body)
    assert collected.message.content == (ToolCall("call_a", "lookup", '{"city":"Oslo"}' + last),)


async def test_chat_tool_calls_without_an_id_get_ids_unique_across_streams() -> None:
    """R10.2: a server that sends no tool-call id (some local servers) gets a fresh id per
    call, the same in the logged chunk and the message, and never one an earlier step used
    (providers refuse a transcript that reuses an id).
    """
    body = sse_body(
        _unindexed_call(None, "lookup", '{"city":"Oslo"}'),
        b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        b"[DONE]",
    )
    first, second = await serve_once("chat", body), await serve_once("chat", body)
    ids = []
    for collected in (first, second):
        (call,) = collected.message.content
        assert isinstance(call, ToolCall)
        assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
        assert call.id in {getattr(chunk, "id", None) for chunk in collected.chunks}
        ids.append(call.id)
    assert ids[0] != ids[1]


def _typed_event(payload: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's ``type`` (Anthropic and Responses streams)."""
    return (
        b"event: " + payload["type"].encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"
    )


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
    collected = await serve_once("messages", b"".join(map(_typed_event, events)))
    assert collected.assembler.usage == Usage(17, 15, 2000, 100)


async def test_anthropic_block_started_twice_is_a_malformed_stream() -> None:
    """R10.3: a proxy reusing a closed block's index would lose the later block silently;
    the stream is refused as malformed instead.
    """
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}},
        },
    ]
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", b"".join(map(_typed_event, events)))
    assert caught.value.code == "MALFORMED_RESPONSE"


_MESSAGE_START = {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}
_MESSAGE_END: list[dict[str, Any]] = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
]


@pytest.mark.parametrize(
    ("block", "late"),
    [
        ({"type": "text", "text": ""}, {"type": "text_delta", "text": " world"}),
        ({"type": "thinking", "thinking": ""}, {"type": "signature_delta", "signature": "SIG"}),
        (
            {"type": "tool_use", "id": "t1", "name": "f"},
            {"type": "input_json_delta", "partial_json": "{}"},
        ),
    ],
    ids=["text", "signature", "tool-arguments"],
)
async def test_anthropic_delta_after_its_block_ended_is_a_malformed_stream(
    block: dict[str, Any], late: dict[str, Any]
) -> None:
    """R10.3, R10.6: a block's end goes out with its content so far, so a delta after it
    would be lost; the stream is refused as malformed, not cut short silently."""
    early = {"text": "hello", "thinking": "hmm", "tool_use": '{"a":'}[block["type"]]
    first = {
        "text": {"type": "text_delta", "text": early},
        "thinking": {"type": "thinking_delta", "thinking": early},
        "tool_use": {"type": "input_json_delta", "partial_json": early},
    }[block["type"]]
    events: list[dict[str, Any]] = [
        _MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": first},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_delta", "index": 0, "delta": late},
        *_MESSAGE_END,
    ]
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", b"".join(map(_typed_event, events)))
    assert (caught.value.code, caught.value.retryable) == ("MALFORMED_RESPONSE", True)
    assert str(caught.value).startswith("anthropic stream, event ")
    assert str(caught.value).endswith(": content for block 0 came after the block ended")


async def test_anthropic_thinking_sent_whole_in_its_start_keeps_its_signature() -> None:
    """R10.2: a thinking block whose start carries its text and signature is signed
    reasoning, as the same block in a whole response is; the signature was dropped."""
    thinking = {"type": "thinking", "thinking": "all at once", "signature": "SIG"}
    events: list[dict[str, Any]] = [
        _MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": thinking},
        {"type": "content_block_stop", "index": 0},
        *_MESSAGE_END,
    ]
    collected = await serve_once("messages", b"".join(map(_typed_event, events)))
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
    return b"".join(map(_typed_event, events))


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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
    assert collected.message.content == (Reasoning("Plan the answer.\n\nCheck it."),)


async def test_responses_whole_body_reasoning_summary_parts_are_separate_paragraphs() -> None:
    """R10.2: a non-streamed reasoning item's summary parts are joined as paragraphs too."""
    parts = [{"type": "summary_text", "text": "Plan."}, {"type": "summary_text", "text": "Check."}]
    body = {"status": "completed", "output": [{"type": "reasoning", "summary": parts}]}
    collected = await serve_once("responses", json.dumps(body).encode(), JSON)
    assert collected.message.content == (Reasoning("Plan.\n\nCheck."),)


@pytest.mark.parametrize(
    ("base_url", "field"),
    [
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("http://localhost:8000/v1", "max_tokens"),
    ],
)
async def test_openai_token_limit_field_follows_the_host(base_url: str, field: str) -> None:
    """OpenAI's own API gets ``max_completion_tokens`` (newer models refuse ``max_tokens``),
    even when its URL is given; other servers get the widely understood ``max_tokens``.
    """
    server = MockServer(EchoPolicy())
    adapter = OpenAIModel(transport=server.transport(), base_url=base_url, api_key="k")
    with trio.fail_after(5):
        async with adapter as model:
            await collect(model, make_request("hi", max_tokens=50))
    limits = {key for key in server.calls[0].body if "max" in key}
    assert limits == {field}


@pytest.mark.parametrize("field", ["max_token", "max_output_tokens", ""])
def test_openai_token_limit_field_other_than_the_two_is_refused(field: str) -> None:
    """A ``max_tokens_param`` other than the two documented fields is refused when the
    adapter is built: a misspelt one was sent as given, and the server left the
    agent's output limit unapplied."""
    with pytest.raises(ValueError, match=r"max_tokens_param must be 'max_completion_tokens'"):
        OpenAIModel(api_key="k", max_tokens_param=field)


REFUSAL = "I can't help with that."


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (
            sse_body(
                b'{"choices":[{"index":0,"delta":{"role":"assistant","content":null,'
                b'"refusal":""},"finish_reason":null}]}',
                b'{"choices":[{"index":0,"delta":{"refusal":"I can\'t help with that."},'
                b'"finish_reason":null}]}',
                b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
                b"[DONE]",
            ),
            SSE,
        ),
        (
            json.dumps(
                {
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": None, "refusal": REFUSAL},
                            "finish_reason": "stop",
                        }
                    ],
                }
            ).encode(),
            JSON,
        ),
    ],
    ids=["stream", "body"],
)
async def test_chat_refusal_is_answer_text(body: bytes, headers: Any) -> None:
    """A Chat Completions refusal (``content`` null) is the answer's text, as in Responses."""
    collected = await serve_once("chat", body, headers)
    assert collected.message.content == (Text(REFUSAL),)
    assert collected.assembler.finish.kind == "stop"


_TWO_CHOICES = json.dumps(
    {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "first"},
                "finish_reason": "stop",
            },
            {
                "index": 1,
                "message": {"role": "assistant", "content": "second"},
                "finish_reason": "length",
            },
        ],
    }
).encode()
_TWO_STREAMED_CHOICES = sse_body(
    b'{"choices":[{"index":0,"delta":{"content":"first"},"finish_reason":null},'
    b'{"index":1,"delta":{"content":"second"},"finish_reason":null}]}',
    b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},'
    b'{"index":1,"delta":{},"finish_reason":"length"}]}',
    b"[DONE]",
)


@pytest.mark.parametrize(
    ("body", "headers"),
    [(_TWO_STREAMED_CHOICES, SSE), (_TWO_CHOICES, JSON)],
    ids=["stream", "whole"],
)
async def test_chat_answer_with_several_choices_is_the_first_choice(
    body: bytes, headers: Any
) -> None:
    """R10.1: of several choices (a server that defaults ``n`` above 1) the answer is the
    first, streamed or whole: a whole body joined every choice's text and took the last
    choice's finish."""
    collected = await serve_once("chat", body, headers)
    assert collected.message.content == (Text("first"),)
    assert collected.assembler.finish == STOP


async def test_chat_answer_cut_for_want_of_server_resources_is_no_success() -> None:
    """R10.3, R10.4: DeepSeek's ``insufficient_system_resource`` finish says its server
    cut the answer short. It is an error finish naming it, not an open finish (a success)
    under which the cut answer stood as complete.
    """
    body = sse_body(
        _chat_piece("The answer", None), _chat_piece("", "insufficient_system_resource")
    )
    collected = await serve_once("chat", body)
    finish = collected.assembler.finish
    assert isinstance(finish, Errored)
    assert finish.code == "insufficient_system_resource"


def _thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": [{"type": "text", "text": text}]}


def _parts_chunk(*parts: dict[str, Any]) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": list(parts)}}]}).encode()


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (
            sse_body(
                _parts_chunk(_thinking("The user ")),
                _parts_chunk(_thinking("greets me.")),
                _parts_chunk({"type": "text", "text": "Hello"}),
                b'{"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}',
                b"[DONE]",
            ),
            SSE,
        ),
        (
            json.dumps(
                {
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": [
                                    _thinking("The user greets me."),
                                    {"type": "text", "text": "Hello!"},
                                ],
                            },
                            "finish_reason": "stop",
                        }
                    ]
                }
            ).encode(),
            JSON,
        ),
    ],
    ids=["stream", "body"],
)
async def test_chat_content_sent_as_parts_is_text_and_reasoning(body: bytes, headers: Any) -> None:
    """R10.2: Mistral's endpoint sends ``content`` as a list of parts, a reasoning model's
    thinking among them: text parts are the answer's text and thinking parts its
    reasoning. Both were dropped (a whole answer came back empty).
    """
    collected = await serve_once("chat", body, headers)
    assert collected.message.content == (Reasoning("The user greets me."), Text("Hello!"))


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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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
        collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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


def _object_arguments_call(arguments: object) -> dict[str, Any]:
    function = {"name": "lookup", "arguments": arguments}
    return {"index": 0, "id": "c1", "type": "function", "function": function}


def _chat_bodies(arguments: object) -> list[tuple[bytes, Any]]:
    """One tool call with *arguments*, streamed and as a whole body."""
    call = _object_arguments_call(arguments)
    delta = {"tool_calls": [call]}
    streamed = sse_body(
        json.dumps(
            {"choices": [{"index": 0, "delta": delta, "finish_reason": "tool_calls"}]}
        ).encode(),
        b"[DONE]",
    )
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    whole = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    return [(streamed, SSE), (json.dumps(whole).encode(), JSON)]


@pytest.mark.parametrize(("body", "headers"), _chat_bodies({"city": "Zürich", "days": [1, 2]}))
async def test_chat_tool_arguments_sent_as_an_object_are_kept_as_json_text(
    body: bytes, headers: Any
) -> None:
    """R10.2: arguments sent as a JSON object (some compatible servers) are kept, as
    compact JSON text, rather than replaced by ``{}``.
    """
    collected = await serve_once("chat", body, headers)
    assert collected.message.content == (
        ToolCall("c1", "lookup", '{"city":"Zürich","days":[1,2]}'),
    )


@pytest.mark.parametrize(
    ("body", "headers"),
    _chat_bodies([1, 2]) + _chat_bodies(7) + _chat_bodies({"huge": float("inf")}),
)
async def test_chat_tool_arguments_of_another_type_are_malformed(body: bytes, headers: Any) -> None:
    """R10.3: arguments that are neither JSON text nor an object cannot be a call's input."""
    with pytest.raises(ProviderStreamError, match="arguments") as caught:
        await serve_once("chat", body, headers)
    assert caught.value.code == "MALFORMED_RESPONSE"


CHAT_ANSWER = b'{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}'
CHAT_USAGE = b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}'


async def _serve_all(api: str, bodies: list[bytes]) -> list[Collected | ProviderError]:
    """Serve *bodies* to one adapter, one call each, in order."""
    replies = [RawReply(200, SSE, body) for body in bodies]
    server = MockServer(ScriptedPolicy(replies))
    outcomes: list[Collected | ProviderError] = []
    with trio.fail_after(5):
        async with mock_adapter(api, server) as model:
            for _ in bodies:
                try:
                    outcomes.append(await collect(model, make_request("hi")))
                except ProviderError as error:
                    outcomes.append(error)
    return outcomes


async def test_chat_stream_cut_before_the_usage_a_server_sends_is_truncated() -> None:
    """R10.2, R10.5: once a server has sent the usage the request asks for, a stream of
    it that ends after the finish reason without usage or ``[DONE]`` was cut.
    """
    whole = sse_body(CHAT_ANSWER, CHAT_USAGE, b"[DONE]")
    first, second = await _serve_all("chat", [whole, sse_body(CHAT_ANSWER)])
    assert isinstance(first, Collected)
    assert first.assembler.usage == Usage(5, 3)
    assert isinstance(second, ProviderConnectionError)
    assert second.code == "STREAM_TRUNCATED"


async def test_chat_stream_ending_at_its_finish_is_complete_from_a_server_without_usage() -> None:
    """Some compatible servers send neither usage nor ``[DONE]``: until a server has sent
    usage, a stream that ends cleanly after its finish reason is complete.
    """
    outcomes = await _serve_all("chat", [sse_body(CHAT_ANSWER), sse_body(CHAT_ANSWER)])
    for outcome in outcomes:
        assert isinstance(outcome, Collected)
        assert outcome.message.content == (Text("hi"),)


def _chat_piece(text: str, finish: str | None) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return json.dumps({"choices": [choice]}).encode()


async def test_chat_empty_finish_reason_is_no_finish() -> None:
    """R10.2, R10.3: Ollama and SGLang send ``finish_reason: ""`` on every chunk before the
    last. That is no finish: a stream of them cut before its real finish is truncated
    (retryable), not a complete answer with a finish named ``''``.
    """
    cut = sse_body(_chat_piece("The answer", ""), _chat_piece(" is", ""))
    with pytest.raises(ProviderConnectionError) as caught:
        await serve_once("chat", cut)
    assert caught.value.code == "STREAM_TRUNCATED"
    whole = sse_body(_chat_piece("The answer", ""), _chat_piece(" is 4.", "stop"), b"[DONE]")
    collected = await serve_once("chat", whole)
    assert collected.message.content == (Text("The answer is 4."),)
    assert collected.assembler.finish == STOP


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body><h1>502 Bad Gateway</h1></body></html>",
        b'{"error":{"message":"quota exhausted for this key","code":"quota"}}\n',
    ],
    ids=["html", "json-error"],
)
async def test_event_stream_without_any_event_says_what_it_carried(body: bytes) -> None:
    """R10.3: a body labelled an event stream that carries no event (a proxy's error page)
    fails with an excerpt of what arrived, not just "ended before it was complete".
    """
    with pytest.raises(ProviderConnectionError) as caught:
        await serve_once("chat", body)
    assert body[:30].decode() in str(caught.value)


@pytest.mark.parametrize("failed", [{}, {"error": None}], ids=["no-error", "null-error"])
async def test_responses_failed_without_error_says_there_was_no_detail(
    failed: dict[str, Any],
) -> None:
    """R10.3: ``response.failed`` with no error object says so, not "stream error: None"."""
    event = {"type": "response.failed", "response": {"status": "failed", **failed}}
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("responses", _typed_event(event))
    assert "None" not in str(caught.value)
    assert "no detail" in str(caught.value)


async def test_responses_whole_failed_response_without_error_is_no_success() -> None:
    """R10.3: a whole (non-streamed) response whose status is ``failed`` failed, error
    object or not: it was an empty answer finished with ``stop``.
    """
    body = json.dumps({"status": "failed", "error": None, "output": []}).encode()
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("responses", body, JSON)
    assert "no detail" in str(caught.value)


_PARTIAL_OUTPUT = [
    {
        "type": "message",
        "id": "msg_1",
        "status": "incomplete",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Once upon", "annotations": []}],
    }
]
_SOME_USAGE = {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}


def _ended_response(status: str, *, streamed: bool) -> tuple[bytes, Any]:
    """A Responses answer whose final response has *status*: whole, or as the stream's
    ``response.completed`` event (the only terminal event a server may send)."""
    response = {
        "object": "response",
        "status": status,
        "output": _PARTIAL_OUTPUT,
        "usage": _SOME_USAGE,
    }
    if streamed:
        return _typed_event({"type": "response.completed", "response": response}), SSE
    return json.dumps(response).encode(), JSON


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_responses_cancelled_response_finishes_aborted(*, streamed: bool) -> None:
    """R10.4, R7.36: a response whose status is ``cancelled`` (the provider cancelled it) is
    no ordinary stop: it finishes ``aborted``, with the output and usage it had."""
    body, headers = _ended_response("cancelled", streamed=streamed)
    collected = await serve_once("responses", body, headers)
    assert collected.assembler.finish.kind == "aborted"
    assert collected.message.content == (Text("Once upon"),)
    assert collected.assembler.usage == Usage(9, 2)


def _incomplete_response(details: object, *, streamed: bool) -> tuple[bytes, Any]:
    """A Responses answer cut short with *details* as its ``incomplete_details``."""
    response = {
        "object": "response",
        "status": "incomplete",
        "incomplete_details": details,
        "output": _PARTIAL_OUTPUT,
        "usage": _SOME_USAGE,
    }
    if streamed:
        return _typed_event({"type": "response.incomplete", "response": response}), SSE
    return json.dumps(response).encode(), JSON


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_responses_incomplete_for_max_output_tokens_finishes_max_tokens(
    *, streamed: bool
) -> None:
    """R10.4: only ``incomplete_details.reason`` ``max_output_tokens`` is a max-tokens cut."""
    body, headers = _incomplete_response({"reason": "max_output_tokens"}, streamed=streamed)
    collected = await serve_once("responses", body, headers)
    assert collected.assembler.finish.kind == "max-tokens"


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_responses_incomplete_for_content_filter_is_an_error_finish(
    *, streamed: bool
) -> None:
    """R10.4: a response the content filter cut short ends as a Chat Completions
    ``content_filter`` finish does: an error finish coded ``content_filter``."""
    body, headers = _incomplete_response({"reason": "content_filter"}, streamed=streamed)
    collected = await serve_once("responses", body, headers)
    assert collected.assembler.finish == Errored(
        "the provider's content filter stopped the output", code="content_filter"
    )


@pytest.mark.parametrize(
    ("details", "kind"),
    [
        ({"reason": "max_messages"}, "max_messages"),
        ({"reason": "steered"}, "steered"),
        ({"reason": None}, "incomplete"),
        (None, "incomplete"),
    ],
    ids=["max-messages", "steered", "null-reason", "no-details"],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_responses_incomplete_for_another_reason_finishes_with_that_reason(
    details: object, kind: str, *, streamed: bool
) -> None:
    """R10.4: an incomplete response for a reason other than the token limit is no
    max-tokens cut (whose tool calls the loop drops): it finishes with an open kind
    naming the reason, or ``incomplete`` when the API gave none, as an unknown Chat
    Completions ``finish_reason`` does."""
    body, headers = _incomplete_response(details, streamed=streamed)
    collected = await serve_once("responses", body, headers)
    assert collected.assembler.finish == OtherFinish(kind)
    assert collected.message.content == (Text("Once upon"),)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_responses_final_response_that_failed_raises(*, streamed: bool) -> None:
    """R10.3: a final response whose status is ``failed`` raises, whether it comes whole
    or as the stream's last event, instead of finishing ``stop``."""
    body, headers = _ended_response("failed", streamed=streamed)
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("responses", body, headers)
    assert "no detail" in str(caught.value)


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("chat", b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"fin'),
        ("responses", b'data: {"type":"response.output_text.delta","output_index":0,"del'),
        ("messages", b'event: message_start\ndata: {"type":"message_start","mess'),
    ],
)
async def test_stream_ending_inside_a_line_is_truncated(api: str, body: bytes) -> None:
    """R10.3: a body that ends in the middle of a line was cut (retryable truncation), not
    a malformed event.
    """
    with pytest.raises(ProviderConnectionError) as caught:
        await serve_once(api, body)
    assert caught.value.code == "STREAM_TRUNCATED"


@pytest.mark.parametrize(
    ("api", "event"),
    [
        (
            "messages",
            {
                "type": "content_block_delta",
                "index": [0],
                "delta": {"type": "text_delta", "text": "a"},
            },
        ),
        (
            "messages",
            {"type": "content_block_start", "index": {}, "content_block": {"type": "text"}},
        ),
        ("messages", {"type": "content_block_stop", "index": [0]}),
        ("messages", {"type": "content_block_stop", "index": True}),
        ("responses", {"type": "response.output_text.delta", "output_index": [0], "delta": "a"}),
        (
            "responses",
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": [0],
                "delta": "a",
            },
        ),
        (
            "responses",
            {"type": "response.function_call_arguments.delta", "output_index": {}, "delta": "{"},
        ),
    ],
)
async def test_block_index_that_is_not_a_number_is_malformed(
    api: str, event: dict[str, Any]
) -> None:
    """R10.3: an ``index`` / ``output_index`` of the wrong type is a malformed response that
    names the field, not a TypeError.
    """
    with pytest.raises(ProviderStreamError, match="index") as caught:
        await serve_once(api, _typed_event(event))
    assert caught.value.code == "MALFORMED_RESPONSE"


@pytest.mark.parametrize("done", [b"[DONE] ", b" [DONE]", b"[DONE]\t"])
async def test_chat_done_sentinel_with_surrounding_whitespace_ends_the_stream(done: bytes) -> None:
    """R10.2: ``data: [DONE] `` (whitespace around the sentinel) ends the stream normally."""
    collected = await serve_once("chat", sse_body(CHAT_ANSWER, CHAT_USAGE, done))
    assert collected.message.content == (Text("hi"),)
    assert collected.assembler.usage == Usage(5, 3)


# Complete items in the shapes of the recorded Responses streams (``output_item.done``,
# ``response.completed``'s ``output``).
COMPLETE_REASONING: dict[str, Any] = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Plan."}, {"type": "summary_text", "text": "Go."}],
}
COMPLETE_MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "annotations": [], "text": "Checking Oslo."}],
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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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
    collected = await serve_once("responses", b"".join(map(_typed_event, events)))
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
    collected = await serve_once("responses", b"".join(map(_typed_event, [*streamed, *done])))
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
    collected = await serve_once(
        "responses", b"".join(map(_typed_event, _two_part_message(events)))
    )
    assert collected.message.content == (Text("Checking Oslo."), Text(" It is sunny."))


@pytest.mark.parametrize(
    ("api", "body", "status", "retryable"),
    [
        (
            "chat",
            sse_body(b'{"error":{"message":"boom","code":500,"type":"InternalServerError"}}'),
            500,
            True,
        ),
        ("chat", sse_body(b'{"error":{"message":"slow down","code":"429"}}'), 429, True),
        (
            "chat",
            sse_body(b'{"error":{"message":"bad","code":400,"type":"BadRequestError"}}'),
            400,
            False,
        ),
        ("responses", _typed_event({"type": "error", "code": 503, "message": "busy"}), 503, True),
        (
            "responses",
            _typed_event(
                {
                    "type": "response.failed",
                    "response": {"status": "failed", "error": {"code": 502, "message": "gw"}},
                }
            ),
            502,
            True,
        ),
        (
            "messages",
            _typed_event({"type": "error", "error": {"code": 529, "message": "Overloaded"}}),
            529,
            True,
        ),
    ],
    ids=["chat-vllm-500", "chat-string-429", "chat-400", "responses-error", "failed", "messages"],
)
async def test_stream_error_with_a_numeric_code_is_retryable_as_that_status(
    api: str, body: bytes, status: int, retryable: bool
) -> None:
    """R10.3: an in-stream error whose ``code`` is an HTTP status (vLLM, LiteLLM) carries
    that status and is retried as the status would be, not refused as an unknown code.
    """
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, body)
    assert (caught.value.code, caught.value.status) == (str(status), status)
    assert caught.value.retryable is retryable
    assert RetryPolicy().is_retryable(caught.value) is retryable


@pytest.mark.parametrize("kind", [[], {}, 7])
async def test_responses_part_type_that_is_not_a_string_is_malformed(kind: object) -> None:
    """R10.3: a ``content_part.done`` whose ``part.type`` is no string is a malformed
    response naming the field, not an untyped ``TypeError`` from a set lookup.
    """
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": COMPLETE_MESSAGE},
        {
            "type": "response.content_part.done",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": kind, "text": "hi"},
        },
    ]
    with pytest.raises(ProviderStreamError, match=r"part\.type is not a string") as caught:
        await serve_once("responses", b"".join(map(_typed_event, events)))
    assert caught.value.code == "MALFORMED_RESPONSE"


@pytest.mark.parametrize(
    "error", [{"type": "", "message": "x"}, {"type": " ", "message": "x"}, {"type": ["x"]}]
)
async def test_stream_error_without_a_usable_code_is_a_stream_error(error: object) -> None:
    """R10.3: an in-stream error whose type is empty or not text gets the generic
    ``STREAM_ERROR`` code, as one without a type does, not an empty or made-up code.
    """
    body = _typed_event({"type": "error", "error": error})
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", body)
    assert caught.value.code == "STREAM_ERROR"
    assert caught.value.retryable is False


@pytest.mark.parametrize("code", [None, ""], ids=["null", "empty"])
async def test_responses_error_event_without_a_code_is_a_stream_error(code: object) -> None:
    """R10.3: a Responses ``error`` event carries its code beside its ``type`` tag; with no
    code it is ``STREAM_ERROR``, as on the other APIs, not the tag ``error`` taken for one."""
    event = {"type": "error", "code": code, "message": "processing failed", "param": None}
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("responses", _typed_event(event))
    assert (caught.value.code, caught.value.retryable) == ("STREAM_ERROR", False)
    assert str(caught.value) == "responses stream error: processing failed"


@pytest.mark.parametrize(
    "error",
    [
        {"code": " ", "type": "overloaded_error"},
        {"code": ["x"], "type": "overloaded_error"},
        {"type": " overloaded_error "},
    ],
)
async def test_stream_error_code_falls_back_to_a_usable_type(error: object) -> None:
    """R10.3: an unusable ``code`` gives way to the error's ``type``, trimmed: an overloaded
    server is still retried."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("messages", _typed_event({"type": "error", "error": error}))
    assert caught.value.code == "overloaded_error"
    assert caught.value.retryable is True


DEEP = b'{"choices":' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize(
    ("body", "headers"), [(sse_body(DEEP), SSE), (DEEP, JSON)], ids=["stream", "json-body"]
)
async def test_json_nested_too_deeply_to_parse_is_a_malformed_response(
    api: str, body: bytes, headers: Any
) -> None:
    """R10.3: an event or body nested past the parser's depth is ``MALFORMED_RESPONSE``
    (retryable), naming the data; it escaped as a bare ``RecursionError`` before."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, body, headers)
    assert (caught.value.code, caught.value.retryable) == ("MALFORMED_RESPONSE", True)
    assert 'JSON nested too deeply to parse: b\'{"choices":[[[[' in str(caught.value)
