"""A client that closes its connection while the mock waits inside a stream (for the first
token, between chunks) ends that wait: the connection, and its task, close at once, not
when the wait ends (with ``math.inf``, when the server closes)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest
import trio

from retinue.providers.mock import EchoPolicy, Timing, open_mock_server

from ._mock_server_kit import REAL_DEADLINE

BODY = json.dumps(
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi there"}]}
).encode()
REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\n\r\n" % len(BODY) + BODY
)


async def _until(condition: Callable[[], bool]) -> None:
    """Poll the server's statistics (a snapshot, on the real clock) until *condition* holds."""
    while not condition():  # noqa: ASYNC110 - statistics() is a snapshot, not an event
        await trio.sleep(0.01)


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
            await _until(lambda: server.statistics().streams_started > 0)
            await stream.aclose()
            await _until(lambda: server.statistics().connections_open == 0)
            statistics = server.statistics()
    assert (statistics.streams_started, statistics.streams_aborted) == (1, 1)
