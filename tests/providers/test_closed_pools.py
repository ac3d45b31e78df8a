"""The adapters' connection pools refuse what reaches them once closed, waiting for nothing.

A request reaches the pools after its adapter closed only on a hop httpx sends itself (a
redirect's next request), so these tests drive the pools' transport directly.
"""

from __future__ import annotations

import httpx2
import pytest
import trio

from retinue.providers._pools import ShardedTransport

REQUEST = httpx2.Request("GET", "http://127.0.0.1:9/")


async def test_a_request_reaching_closed_pools_is_refused_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a request sent to the pools after they closed, every connection taken, fails at once
    as closed, where it waited for a connection that no close would free."""
    transport = ShardedTransport(1, 1)
    transport._slots.acquire_nowait()  # every connection in use
    await transport.aclose()
    with trio.fail_after(60), pytest.raises(httpx2.TransportError, match="pools are closed"):
        await transport.handle_async_request(REQUEST)


async def test_closing_refuses_requests_waiting_through_a_proxy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: the pools reaching servers through a proxy share the connection count, and closing
    refuses the requests waiting on it there too, where they waited until their timeout."""
    transport = ShardedTransport(1, 1)
    proxied = transport.through(httpx2.Proxy("http://127.0.0.1:9"))
    transport._slots.acquire_nowait()  # every connection in use
    refused: list[BaseException] = []

    async def send() -> None:
        try:
            await proxied.handle_async_request(REQUEST)
        except httpx2.TransportError as error:
            refused.append(error)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            await trio.testing.wait_all_tasks_blocked()
            await transport.aclose()
    assert [str(error) for error in refused] == ["the adapter's connection pools are closed"]
    await proxied.aclose()
