"""A Chat Completions stream from a server known to send the usage it is asked for is
complete at the usage chunk after its finish reason: a server holding the body open
without ``[DONE]`` costs the turn nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
import trio

from retinue._stream import StreamChunk
from retinue.providers._openai_chat_stream import ChatStreamDecoder
from retinue.providers._sse import SseDecoder
from retinue.providers.openai import OpenAIModel

from .support import ALL_FIXTURES, collect, load, make_request, sse_body

ANSWER = sse_body(
    b'{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}',
    b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    b'{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}',
)
CHAT_STREAMS = [
    path.name
    for path in ALL_FIXTURES
    if path.name.startswith("chat_stream") and load(path.name)["response"]["status"] == 200
]


class _HoldingTransport(httpx2.AsyncBaseTransport):
    """Answers :data:`ANSWER`; the first time with ``[DONE]`` and the end of the body,
    later without either, the body held open."""

    def __init__(self) -> None:
        self.requests = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await trio.lowlevel.checkpoint()
        self.requests += 1
        held = self.requests > 1
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Body(held=held)
        )


class _Body(httpx2.AsyncByteStream):
    def __init__(self, *, held: bool) -> None:
        self._held = held

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await trio.lowlevel.checkpoint()
        yield ANSWER
        if self._held:
            await trio.sleep_forever()
        yield b"data: [DONE]\n\n"


async def test_a_stream_held_open_after_its_usage_finishes_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: once a server has sent the usage a request asks for, a later stream of it
    that sends its finish reason and usage, then holds the body open without ``[DONE]``,
    yields its finish within the drain's second, with the chunks a whole stream yields;
    it waited for the read timeout, then failed ``TIMEOUT`` with its answer lost."""
    transport = _HoldingTransport()
    with trio.fail_after(30):
        async with OpenAIModel(
            transport=transport, base_url="http://mock/v1", api_key="k", timeout=600.0
        ) as model:
            whole = await collect(model, make_request("hi"))
            started = trio.current_time()
            held = await collect(model, make_request("hi"))
            took = trio.current_time() - started
    assert held.chunks == whole.chunks
    assert took <= 1.5


def _decoded(body: str, *, expect_usage: bool) -> tuple[list[StreamChunk], int]:
    """The chunks of a recorded *body*, and how many of its events were read."""
    decoder = ChatStreamDecoder(expect_usage=expect_usage)
    sse = SseDecoder()
    chunks: list[StreamChunk] = []
    read = 0
    for event in sse.feed(body.encode()):
        if decoder.done:
            break
        read += 1
        chunks.extend(decoder.feed(event))
    return [*chunks, *decoder.close()], read


@pytest.mark.parametrize("name", CHAT_STREAMS)
def test_recorded_streams_decode_alike_when_usage_is_expected(name: str) -> None:
    """Every recorded Chat stream yields the same chunks whether or not its usage is
    expected, reading every event but ``[DONE]`` (the usage is its last data event)."""
    body: str = load(name)["response"]["body"]
    plain, read_plain = _decoded(body, expect_usage=False)
    expected, read_expected = _decoded(body, expect_usage=True)
    assert expected == plain
    assert read_expected == read_plain - 1
