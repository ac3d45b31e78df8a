"""Chat Completions bodies that compatible servers send but OpenAI does not: tool calls without
an index or an id, refusals, several choices, content sent as parts, arguments sent as an
object, usage counts and where the stream ends; and the token limit field each host takes.

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
from retinue._stream import STOP, Errored, Usage
from retinue.providers import ProviderConnectionError, ProviderError, ProviderStreamError
from retinue.providers.mock import EchoPolicy, MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel

from .support import JSON, SSE, Collected, collect, make_request, mock_adapter, serve_once, sse_body

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
    if name is not None:
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
    id: each is its own call, not merged into one call, its arguments run together and
    the first call's name lost."""
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
    The calls are not merged into one, its arguments run together and the second name lost."""
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
    adapter is built, not sent as given for the server to ignore, leaving the agent's
    output limit unapplied."""
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
    first, streamed or whole: a whole body does not join every choice's text and take the
    last choice's finish."""
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
    reasoning, neither dropped (a whole answer does not come back empty).
    """
    collected = await serve_once("chat", body, headers)
    assert collected.message.content == (Reasoning("The user greets me."), Text("Hello!"))


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


@pytest.mark.parametrize("done", [b"[DONE] ", b" [DONE]", b"[DONE]\t"])
async def test_chat_done_sentinel_with_surrounding_whitespace_ends_the_stream(done: bytes) -> None:
    """R10.2: ``data: [DONE] `` (whitespace around the sentinel) ends the stream normally."""
    collected = await serve_once("chat", sse_body(CHAT_ANSWER, CHAT_USAGE, done))
    assert collected.message.content == (Text("hi"),)
    assert collected.assembler.usage == Usage(5, 3)
