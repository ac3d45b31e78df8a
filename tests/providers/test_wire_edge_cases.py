"""Adapters against bodies from compatible servers and proxies that fail or end short: error
objects sent with status 200, bodies of no API's shape, cut or malformed streams, in-stream
error codes, Responses answers failed, cancelled or incomplete; and the shard header kept
from the provider.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from retinue._content import Text
from retinue._stream import Errored, OtherFinish, Usage
from retinue.providers import ProviderConnectionError, ProviderStreamError, RetryPolicy
from retinue.providers.mock import EchoPolicy, MockServer

from ._wire_edge_kit import COMPLETE_MESSAGE, typed_event
from .support import JSON, SSE, collect, make_request, mock_adapter, serve_once, sse_body

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
        await serve_once("responses", typed_event(event))
    assert "None" not in str(caught.value)
    assert "no detail" in str(caught.value)


async def test_responses_whole_failed_response_without_error_is_no_success() -> None:
    """R10.3: a whole (non-streamed) response whose status is ``failed`` failed, error
    object or not, not an empty answer finished with ``stop``.
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
        return typed_event({"type": "response.completed", "response": response}), SSE
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


def _incomplete_response(
    details: object, *, streamed: bool, status: str | None = "incomplete"
) -> tuple[bytes, Any]:
    """A Responses answer cut short with *details* as its ``incomplete_details``, its status
    *status* (left out when ``None``)."""
    response = {
        "object": "response",
        "incomplete_details": details,
        "output": _PARTIAL_OUTPUT,
        "usage": _SOME_USAGE,
    }
    if status is not None:
        response["status"] = status
    if streamed:
        return typed_event({"type": "response.incomplete", "response": response}), SSE
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
async def test_responses_without_a_status_cut_at_the_token_limit_finishes_max_tokens(
    *, streamed: bool
) -> None:
    """R10.4: a compatible server that leaves out the response's status still says the answer
    was cut by its ``incomplete_details``: a ``max_output_tokens`` reason is a max-tokens cut,
    not a stop whose calls the loop would run."""
    details = {"reason": "max_output_tokens"}
    body, headers = _incomplete_response(details, streamed=streamed, status=None)
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
        await serve_once(api, typed_event(event))
    assert caught.value.code == "MALFORMED_RESPONSE"


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
        ("chat", sse_body(b'{"error":{"message":"busy","code":503.0}}'), 503, True),
        (
            "chat",
            sse_body(b'{"error":{"message":"bad","code":400,"type":"BadRequestError"}}'),
            400,
            False,
        ),
        ("responses", typed_event({"type": "error", "code": 503, "message": "busy"}), 503, True),
        (
            "responses",
            typed_event(
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
            typed_event({"type": "error", "error": {"code": 529, "message": "Overloaded"}}),
            529,
            True,
        ),
    ],
    ids=[
        "chat-vllm-500",
        "chat-string-429",
        "chat-float-503",
        "chat-400",
        "responses-error",
        "failed",
        "messages",
    ],
)
async def test_stream_error_with_a_numeric_code_is_retryable_as_that_status(
    api: str, body: bytes, status: int, retryable: bool
) -> None:
    """R10.3: an in-stream error whose ``code`` is an HTTP status (vLLM, LiteLLM), as a
    number, text or a whole float, carries that status and is retried as the status would
    be, not refused as an unknown code.
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
        await serve_once("responses", b"".join(map(typed_event, events)))
    assert caught.value.code == "MALFORMED_RESPONSE"


@pytest.mark.parametrize(
    "error", [{"type": "", "message": "x"}, {"type": " ", "message": "x"}, {"type": ["x"]}]
)
async def test_stream_error_without_a_usable_code_is_a_stream_error(error: object) -> None:
    """R10.3: an in-stream error whose type is empty or not text gets the generic
    ``STREAM_ERROR`` code, as one without a type does, not an empty or made-up code.
    """
    body = typed_event({"type": "error", "error": error})
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
        await serve_once("responses", typed_event(event))
    assert (caught.value.code, caught.value.retryable) == ("STREAM_ERROR", False)
    assert str(caught.value) == "openai stream, event 1: responses stream error: processing failed"


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
        await serve_once("messages", typed_event({"type": "error", "error": error}))
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
    (retryable), naming the data, not a bare ``RecursionError`` escaping."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, body, headers)
    assert (caught.value.code, caught.value.retryable) == ("MALFORMED_RESPONSE", True)
    assert 'JSON nested too deeply to parse: b\'{"choices":[[[[' in str(caught.value)
