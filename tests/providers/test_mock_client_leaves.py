"""A client that closes its connection while the mock waits out a latency ends that wait.

Nothing reads the socket then, so unless the server watches for the close it
holds the connection, and its task, until the latency ends: with ``math.inf``,
until the server closes.
"""

from __future__ import annotations

import math

import trio

from retinue.providers.mock import MockServer, Timing, open_mock_server

from ._mock_server_kit import REAL_DEADLINE, raw_chat_request, until

REQUEST = raw_chat_request()


async def _send_and_leave(server: MockServer) -> None:
    host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(REQUEST)
    await until(lambda: server.statistics().requests > 0)
    await stream.aclose()


async def test_client_leaving_during_an_endless_latency_closes_its_connection() -> None:
    """The connection closes once its client has gone, though the latency never ends."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(timing=Timing(latency=math.inf)) as server:
            await _send_and_leave(server)
            await until(lambda: server.statistics().connections_open == 0)
            assert server.statistics().connections_total == 1


async def test_pipelined_requests_during_a_latency_are_both_answered() -> None:
    """A second request sent while the first waits is kept and answered after it."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(timing=Timing(latency=0.05)) as server:
            host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(REQUEST)
            await until(lambda: server.statistics().requests > 0)
            await stream.send_all(REQUEST)
            received = b""
            while received.count(b"HTTP/1.1 200") < 2 or not received.endswith(b"}"):
                received += await stream.receive_some(65536)
            await stream.aclose()
    assert received.count(b"HTTP/1.1 200") == 2


async def test_client_leaving_after_sending_more_during_a_latency_closes_its_connection() -> None:
    """What the client sends while it waits (its next request, or a byte of one) is kept,
    and its leaving after that is still noticed."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(timing=Timing(latency=math.inf)) as server:
            host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(REQUEST)
            await until(lambda: server.statistics().requests > 0)
            await stream.send_all(REQUEST[:1])
            await trio.sleep(0.05)
            await stream.aclose()
            await until(lambda: server.statistics().connections_open == 0)
