"""A client that closes its connection while the mock waits inside a stream (for the first
token, between chunks) ends that wait: the connection, and its task, close at once, not
when the wait ends (with ``math.inf``, when the server closes)."""

from __future__ import annotations

import math

import pytest
import trio

from retinue.providers.mock import EchoPolicy, Timing, open_mock_server

from ._mock_server_kit import REAL_DEADLINE, raw_chat_request, until

REQUEST = raw_chat_request(stream=True)


@pytest.mark.parametrize(
    "timing", [Timing(first_token=math.inf), Timing(inter_chunk=math.inf)], ids=repr
)
async def test_client_leaving_during_a_streams_wait_closes_its_connection(
    timing: Timing,
) -> None:
    """The stream counts as aborted and its connection closes once its client has gone,
    though the wait never ends."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(EchoPolicy(chunks=4), timing=timing) as server:
            host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(REQUEST)
            await until(lambda: server.statistics().streams_started > 0)
            await stream.aclose()
            await until(lambda: server.statistics().connections_open == 0)
            statistics = server.statistics()
    assert (statistics.streams_started, statistics.streams_aborted) == (1, 1)
