"""A request that waited for a free connection and was given one with most of its
``timeout`` left spent that time on the server: a timeout then is the server's
``TIMEOUT``, not ``POOL_TIMEOUT``, which names a connection given too late to use."""

from __future__ import annotations

import pytest
import trio

from ._raw_servers_kit import BIG_TEXT, Charged, adapter, call_charged, raw_server, read_request


async def _first_read_then_none(stream: trio.SocketStream, seen: list[bytes]) -> None:
    """Read the first request whole and close its connection a moment later; read nothing
    of any later connection."""
    if seen:
        await trio.sleep_forever()
    body = await read_request(stream)
    if body is not None:
        seen.append(body)
    await trio.sleep(0.05)


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_short_wait_for_a_connection_is_not_blamed_for_the_timeout(api: str) -> None:
    """R10.3: with one connection, the second request waits about 0.05 s for it, then
    spends the rest of its 0.5 s on a server that takes none of its body: it fails
    ``TIMEOUT`` saying the server did not take the whole request, and gives its charge
    back, where it failed ``POOL_TIMEOUT``, saying no connection was free in 0.5 s."""
    results: dict[str, Charged] = {}
    with trio.fail_after(30):
        async with raw_server(_first_read_then_none) as (base_url, seen):
            model = adapter(api, base_url, timeout=0.5, max_connections=1, pool_size=1)
            async with model, trio.open_nursery() as nursery:

                async def call(name: str, text: str) -> None:
                    results[name] = await call_charged(model, text=text, session_id=name)

                nursery.start_soon(call, "first", "hello")
                await trio.sleep(0.01)
                nursery.start_soon(call, "second", BIG_TEXT)
    second = results["second"].error
    assert second is not None
    assert second.code == "TIMEOUT"
    assert "did not take the whole request" in second.message
    assert (results["second"].requests, len(seen)) == (0, 1)
