"""A stream cut short says whose stream it was and how far it had come."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
import trio

from retinue.providers import ProviderConnectionError
from retinue.providers.mock import MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel

from .support import SSE, collect, make_request, sse_body

TEXT = b'{"choices":[{"index":0,"delta":{"content":"hi"}}]}'


async def test_a_stream_that_ends_early_names_its_provider_and_its_events(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: a chat stream that ends after three events, with no finish, fails naming the
    adapter's provider and the events it carried, not only "the chat completions
    stream", which every OpenAI-compatible adapter of a runtime reads."""
    server = MockServer(ScriptedPolicy([RawReply(200, SSE, sse_body(TEXT, TEXT, TEXT))]))
    with trio.fail_after(60):
        async with OpenAIModel(
            base_url="http://mock/v1",
            api_key="k",
            provider="deepseek",
            transport=server.transport(),
        ) as model:
            with pytest.raises(ProviderConnectionError) as caught:
                await collect(model, make_request("hi"))
    assert caught.value.code == "STREAM_TRUNCATED"
    assert str(caught.value) == (
        "deepseek: the chat completions stream ended before it was complete, after 3 events"
    )


class _Broken(httpx2.AsyncByteStream):
    """Two events, then the connection fails."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield sse_body(TEXT, TEXT)
        raise httpx2.RemoteProtocolError("peer closed connection")


async def test_a_stream_whose_connection_fails_says_how_far_it_came(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: a connection that fails mid-stream says after how many events, and is raised
    from the transport's error."""

    def answer(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Broken())

    transport = httpx2.MockTransport(answer)
    with trio.fail_after(60):
        async with OpenAIModel(
            base_url="http://mock/v1", api_key="k", transport=transport
        ) as model:
            with pytest.raises(ProviderConnectionError) as caught:
                await collect(model, make_request("hi"))
    assert str(caught.value).startswith("openai stream failed: RemoteProtocolError(")
    assert str(caught.value).endswith(", after 2 events")
    assert isinstance(caught.value.__cause__, httpx2.RemoteProtocolError)
