"""A request that waited for a free connection and then timed out on the server says how
long of its ``timeout`` the server had, and how long went on the wait."""

from __future__ import annotations

import re

import pytest
import trio

from retinue.providers._sending import brief_seconds
from retinue.providers.mock import Timing, open_mock_server

from ._raw_servers_kit import Charged, adapter, call_charged

_SERVER_TIME = re.compile(
    r"sent no response headers within ([0-9.]+) s \(the request spent ([0-9.]+) s of its"
    r" 0\.6 s timeout waiting for a free connection\)"
)


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_timeout_after_a_wait_for_a_connection_says_how_long_the_server_had(
    api: str,
) -> None:
    """R10.3: with one connection held about 0.5 s by a slow answer, a request with a
    0.6 s timeout waits about 0.45 s for it and times out about 0.15 s after the server
    got it: it says the server sent no headers within that time, and how long the wait
    took, where it said the server sent none within the whole 0.6 s."""
    results: dict[str, Charged] = {}
    with trio.fail_after(30):
        async with open_mock_server(timing=Timing(latency=0.5)) as server:
            model = adapter(api, server.base_url, timeout=0.6, max_connections=1, pool_size=1)
            async with model, trio.open_nursery() as nursery:

                async def call(name: str) -> None:
                    results[name] = await call_charged(model, session_id=name)

                nursery.start_soon(call, "first")
                await trio.sleep(0.05)
                nursery.start_soon(call, "second")
    assert results["first"].error is None
    error = results["second"].error
    assert error is not None
    assert error.code == "TIMEOUT"
    found = _SERVER_TIME.search(error.message)
    assert found is not None, error.message
    had, waited = float(found[1]), float(found[2])
    assert had < 0.3 < waited


@pytest.mark.parametrize(
    ("seconds", "written"),
    [
        (0.0, "0.0"),
        (0.6, "0.6"),
        (0.154, "0.15"),
        (0.0042, "0.004"),
        (0.00002, "0.0001"),
        (600.0, "600.0"),
    ],
)
def test_time_a_request_had_never_reads_as_none(seconds: float, written: str) -> None:
    """R10.3: the seconds a timeout message gives are written to two decimals, but time
    under 0.01 s, which two decimals would write ``0.0`` ("the server sent no headers
    within 0.0 s" of a request that waited nearly all its timeout for a connection)."""
    assert brief_seconds(seconds) == written
