"""A response's media type is read without regard to case, as HTTP has it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
import trio

from retinue._stream import Finish
from retinue.providers import ProviderConnectionError

from .support import PartsBody, _adapter, collect, load, make_request, serve_once

WHOLE = {
    "chat": "chat_nonstream_finish_length.json",
    "responses": "responses_nonstream_function_calls.json",
    "messages": "messages_nonstream_max_tokens.json",
}


@pytest.mark.parametrize("media_type", ["Application/JSON", "APPLICATION/JSON; charset=UTF-8"])
@pytest.mark.parametrize("api", sorted(WHOLE))
async def test_a_whole_json_answer_is_read_whatever_the_case_of_its_media_type(
    api: str, media_type: str
) -> None:
    """R10.3: a recorded non-streamed answer whose ``content-type`` spells
    ``application/json`` in capitals is decoded as the lower-case one is, not taken for an
    event stream that carried no event."""
    body = load(WHOLE[api])["response"]["body"].encode()
    expected = await serve_once(api, body, (("content-type", "application/json"),))
    got = await serve_once(api, body, (("content-type", media_type),))
    assert isinstance(got.chunks[-1], Finish)
    assert expected.message.content
    assert got.message.content == expected.message.content
    assert got.assembler.finish == expected.assembler.finish
    assert got.assembler.usage == expected.assembler.usage


STREAMED = {
    "chat": "chat_stream_text_usage.json",
    "responses": "responses_stream_parallel_function_calls.json",
    "messages": "messages_stream_text.json",
}


@pytest.mark.parametrize(
    "start", [b"", b": keep-alive\n\n", b"\n\n"], ids=["event", "comment", "blank"]
)
@pytest.mark.parametrize("api", sorted(STREAMED))
async def test_an_event_stream_labelled_json_is_read_as_the_event_stream_it_is(
    api: str, start: bytes
) -> None:
    """R10.3: a recorded stream that a server or proxy labels ``application/json`` gives the
    answer it gives as ``text/event-stream``, as the SDKs read any streamed answer, not
    read as one JSON document to fail as ``MALFORMED_RESPONSE``, on every retry alike."""
    body = start + load(STREAMED[api])["response"]["body"].encode()
    expected = await serve_once(api, body, (("content-type", "text/event-stream"),))
    got = await serve_once(api, body, (("content-type", "application/json"),))
    assert expected.message.content
    assert got.message.content == expected.message.content
    assert got.assembler.finish == expected.assembler.finish
    assert got.assembler.usage == expected.assembler.usage


class _BytewiseBody(httpx2.AsyncByteStream):
    """A body that arrives a byte at a time, as a slow proxy may pass it on."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for index in range(len(self.body)):
            yield self.body[index : index + 1]


@pytest.mark.parametrize("kind", ["streamed", "whole"])
async def test_a_body_labelled_json_is_told_apart_a_byte_at_a_time_after_a_bom(kind: str) -> None:
    """R10.3: with a byte order mark and blank lines before it, an event stream labelled
    ``application/json`` is still read as one, and a JSON answer as JSON, when neither
    comes in one piece."""
    names = {"streamed": STREAMED["chat"], "whole": WHOLE["chat"]}
    media_types = {"streamed": "text/event-stream", "whole": "application/json"}
    recorded = load(names[kind])["response"]["body"].encode()
    expected = await serve_once("chat", recorded, (("content-type", media_types[kind]),))

    def answer(_request: httpx2.Request) -> httpx2.Response:
        body = _BytewiseBody(b"\xef\xbb\xbf\n\n" + recorded)
        return httpx2.Response(200, headers={"content-type": "application/json"}, stream=body)

    with trio.fail_after(30):
        async with _adapter("chat", "http://mock", transport=httpx2.MockTransport(answer)) as model:
            got = await collect(model, make_request("hi"))
    assert expected.message.content
    assert got.message.content == expected.message.content
    assert got.assembler.finish == expected.assembler.finish


async def test_an_event_stream_after_a_bom_it_sends_a_byte_at_a_time_gives_its_answer() -> None:
    """R10.3: an event stream that starts with a byte order mark, sent a byte at a time,
    gives the answer it gives in one piece: the mark's bytes are not taken into the first
    field's name, so no event is lost (here the answer's first text)."""
    recorded = load(STREAMED["chat"])["response"]["body"].encode()
    # Without its role-only chunk, as some servers send it: the first event has text.
    recorded = recorded.split(b"\n\n", 1)[1]
    event_stream = (("content-type", "text/event-stream"),)
    expected = await serve_once("chat", recorded, event_stream)

    def answer(_request: httpx2.Request) -> httpx2.Response:
        body = _BytewiseBody(b"\xef\xbb\xbf" + recorded)
        return httpx2.Response(200, headers=dict(event_stream), stream=body)

    with trio.fail_after(60):
        async with _adapter("chat", "http://mock", transport=httpx2.MockTransport(answer)) as model:
            got = await collect(model, make_request("hi"))
    assert expected.message.content
    assert got.message.content == expected.message.content
    assert got.assembler.finish == expected.assembler.finish
    assert got.assembler.usage == expected.assembler.usage


async def _refusal_of(body: httpx2.AsyncByteStream) -> ProviderConnectionError:
    """The error of a chat stream that sends *body* as its event stream."""

    def answer(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=body)

    with trio.fail_after(30):
        async with _adapter("chat", "http://mock", transport=httpx2.MockTransport(answer)) as model:
            with pytest.raises(ProviderConnectionError) as caught:
                await collect(model, make_request("hi"))
    return caught.value


async def test_a_page_after_a_byte_order_mark_sent_alone_is_quoted_in_the_error() -> None:
    """R10.3: an event stream that carries no event, only a proxy's page after a byte order
    mark that came in a part of its own, says what it carried, as when the mark comes with
    the page, not only that it ended after 0 events."""
    page = b"<html>Bad gateway</html>"
    alone = await _refusal_of(PartsBody(b"\xef\xbb\xbf", page))
    together = await _refusal_of(PartsBody(b"\xef\xbb\xbf" + page))
    assert "only '<html>Bad gateway</html>'" in together.message
    assert alone.message == together.message
