"""Closing an adapter while a request waits for a connection or for its response headers:
the request is refused, never sent through the closed pools, and leaves no connection open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import httpx2
import pytest
import trio

from retinue.providers import ProviderError
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, Timing, open_mock_server
from retinue.providers.openai import OpenAIModel

from .support import collect, make_request, served_by

REAL_DEADLINE = 20.0
BOTH_SDKS = pytest.mark.parametrize("api", ["chat", "messages"])
CHAT_STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


async def _outcome(model: OpenAIModel | AnthropicModel, session_id: str) -> str:
    """How a stream of *model* ended: ``done``, or its error's code."""
    try:
        await collect(model, make_request("hello " * 20, session_id=session_id))
    except ProviderError as exc:
        return exc.code or ""
    return "done"


@BOTH_SDKS
async def test_a_request_waiting_for_a_connection_is_refused_when_the_adapter_closes(
    api: str,
) -> None:
    """R12.9: a request still waiting for a free connection when its adapter closes fails
    ``ADAPTER_CLOSED``; it is not sent through the closed pools on a new connection that
    nothing would close."""
    outcomes: dict[str, str] = {}

    async def run(session_id: str) -> None:
        outcomes[session_id] = await _outcome(model, session_id)

    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(
            EchoPolicy(chunks=40), timing=Timing(inter_chunk=0.05)
        ) as server:
            model = served_by(api, server, max_connections=1, pool_size=1, timeout=3.0)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, "streaming")
                await trio.sleep(0.2)
                nursery.start_soon(run, "waiting")
                await trio.sleep(0.2)
                await model.aclose()
            await trio.sleep(0.3)
            statistics = server.statistics()
    assert outcomes["waiting"] == "ADAPTER_CLOSED"
    assert statistics.requests == 1
    assert statistics.connections_open == 0


@BOTH_SDKS
async def test_a_request_waiting_for_a_connection_is_refused_as_the_adapter_closes(
    api: str,
) -> None:
    """R12.9: a request waiting for a connection that an idle stream holds fails
    ``ADAPTER_CLOSED`` as its adapter closes, not once the connection frees or its wait times
    out: the holder keeps its connection until the waiting request has ended."""
    outcomes: dict[str, str] = {}
    waiting_ended = trio.Event()

    async def hold() -> None:
        async with aclosing(model.stream(make_request("hello", session_id="idle"))) as stream:
            await anext(stream)
            outcomes["idle"] = "holding"
            await waiting_ended.wait()

    async def wait() -> None:
        outcomes["waiting"] = await _outcome(model, "waiting")
        waiting_ended.set()

    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(
            EchoPolicy(chunks=40), timing=Timing(inter_chunk=0.05)
        ) as server:
            model = served_by(api, server, max_connections=1, pool_size=1, timeout=60.0)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                await trio.sleep(0.2)
                nursery.start_soon(wait)
                await trio.sleep(0.2)
                await model.aclose()
            requests = server.statistics().requests
    assert outcomes == {"idle": "holding", "waiting": "ADAPTER_CLOSED"}
    assert requests == 1


class _HeldTransport(httpx2.AsyncBaseTransport):
    """A caller's transport that holds each request until *gate* is set, then answers a
    whole Chat stream whose body says when it is closed."""

    def __init__(self) -> None:
        self.arrived = trio.Event()
        self.gate = trio.Event()
        self.bodies_closed = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.arrived.set()
        await self.gate.wait()
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Body(self)
        )

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class _Body(httpx2.AsyncByteStream):
    def __init__(self, transport: _HeldTransport) -> None:
        self._transport = transport

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await trio.lowlevel.checkpoint()
        yield CHAT_STREAM

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self._transport.bodies_closed += 1


async def test_a_response_that_arrives_after_the_adapter_closed_is_closed_and_refused(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R12.9: with a transport of the caller's own, which the adapter cannot stop sending,
    a response whose headers arrive after the adapter closed is closed at once and its
    stream fails ``ADAPTER_CLOSED``, as a stream started after the close does."""
    transport = _HeldTransport()
    model = OpenAIModel(transport=transport, base_url="http://mock/v1", api_key="k")
    outcomes: dict[str, str] = {}

    async def run() -> None:
        outcomes["held"] = await _outcome(model, "held")

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await transport.arrived.wait()
            await model.aclose()
            transport.gate.set()
    assert outcomes["held"] == "ADAPTER_CLOSED"
    assert transport.bodies_closed == 1


async def test_an_open_adapter_still_streams_through_a_transport_of_its_own(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The check after the send refuses only a closed adapter's responses."""
    transport = _HeldTransport()
    transport.gate.set()
    with trio.fail_after(60):
        async with OpenAIModel(
            transport=transport, base_url="http://mock/v1", api_key="k"
        ) as model:
            assert await _outcome(model, "open") == "done"
    assert transport.bodies_closed == 1
