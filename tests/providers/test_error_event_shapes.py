"""In-stream errors in the shapes the SDKs raise on but the APIs' own documents do not
show: an event named ``error`` whatever its data, and an ``error`` object with no type."""

from __future__ import annotations

import pytest
import trio

from retinue._content import Text
from retinue.providers import (
    AdmissionController,
    ProviderError,
    ProviderStreamError,
    RetryPolicy,
    manage,
)
from retinue.providers.mock import MockReply, MockServer, RawReply, ScriptedPolicy

from .support import SSE, collect, make_request, mock_adapter, serve_once, sse_body

ANTHROPIC_START = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"usage":{"input_tokens":1}}}\n\n'
)
BARE_OVERLOADED = b'{"error":{"type":"overloaded_error","message":"Overloaded"}}'


@pytest.mark.parametrize(
    ("api", "body", "code", "message"),
    [
        pytest.param(
            "messages",
            ANTHROPIC_START + b"event: error\ndata: " + BARE_OVERLOADED + b"\n\n",
            "overloaded_error",
            "Overloaded",
            id="messages-error-object-without-type",
        ),
        pytest.param(
            "messages",
            ANTHROPIC_START + b"event: error\ndata: Internal server error\n\n",
            "STREAM_ERROR",
            "Internal server error",
            id="messages-plain-text",
        ),
        pytest.param(
            "responses",
            b'event: error\ndata: {"error":{"code":"server_error","message":"boom"}}\n\n',
            "server_error",
            "boom",
            id="responses-named-error-object",
        ),
        pytest.param(
            "responses",
            b'data: {"error":{"code":"rate_limit_exceeded","message":"slow down"}}\n\n',
            "rate_limit_exceeded",
            "slow down",
            id="responses-unnamed-error-object",
        ),
        pytest.param(
            "chat",
            b"event: error\ndata: upstream connect error\n\n",
            "STREAM_ERROR",
            "upstream connect error",
            id="chat-plain-text",
        ),
    ],
)
async def test_an_error_event_raises_the_error_it_carries(
    api: str, body: bytes, code: str, message: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: the stream raises the provider's error, with its code and message: the
    event is not passed over (the stream then read as cut short), nor its text reported
    as malformed data."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once(api, body, SSE)
    assert caught.value.code == code
    assert message in caught.value.message
    # Plain text has no code to judge it by: retried, as a garbled answer is.
    if code == "STREAM_ERROR":
        assert caught.value.retryable


@pytest.mark.parametrize(
    ("api", "body"),
    [
        pytest.param(
            "messages",
            ANTHROPIC_START + b'event: error\ndata: {"type":"error","error":{"type":"overlo',
            id="messages",
        ),
        pytest.param(
            "responses", b'event: error\ndata: {"type":"error","code":"server_e', id="responses"
        ),
        pytest.param("chat", b'event: error\ndata: {"error":{"message":"bo', id="chat"),
    ],
)
async def test_an_error_event_cut_at_the_end_of_the_body_is_a_truncated_stream(
    api: str, body: bytes, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: an error event whose JSON the body's end cut is the stream cut short,
    retryable as any torn body is, not a final STREAM_ERROR quoting the torn text."""
    with pytest.raises(ProviderError) as caught:
        await serve_once(api, body, SSE)
    assert (caught.value.code, caught.value.retryable) == ("STREAM_TRUNCATED", True)


async def test_an_overload_sent_as_a_bare_error_event_pauses_its_lane(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: an overload in an ``error`` event without a type is a throttle, as the
    typed event is: the lane counts it and the retry follows."""
    overloaded = RawReply(
        200, SSE, ANTHROPIC_START + b"event: error\ndata: %s\n\n" % BARE_OVERLOADED
    )
    server = MockServer(ScriptedPolicy([overloaded, MockReply("ok")]))
    admission = AdmissionController()
    with trio.fail_after(600):
        async with mock_adapter("messages", server) as raw:
            model = manage(raw, retry=RetryPolicy(max_attempts=2), admission=admission)
            collected = await collect(model, make_request("hi"))
    assert collected.message.content == (Text("ok"),)
    assert admission.statistics().throttled == 1
    assert len(server.calls) == 2


async def test_an_event_of_a_type_naming_an_error_does_not_end_the_response(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: a Responses event of a type that carries an ``error`` of its own (a steer the
    API refused) is no failure of the response, which streams to its end."""
    steer_failed = (
        b'{"type":"response.steer.failed","error":{"code":"invalid_input",'
        b'"type":"invalid_request_error","message":"no"},"sequence_number":3}'
    )
    text = b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"hi"}'
    done = b'{"type":"response.completed","response":{"status":"completed"}}'
    collected = await serve_once("responses", sse_body(text, steer_failed, done), SSE)
    assert collected.message.content == (Text("hi"),)
