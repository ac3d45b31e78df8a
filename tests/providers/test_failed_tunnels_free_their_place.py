"""A tunnel through an HTTP proxy whose TLS handshake failed gives its place in the pool
back: the next request to that host opens a connection of its own."""

from __future__ import annotations

import pytest
import trio

from ._raw_servers_kit import adapter, call_charged, raw_server


async def _tunnel_nowhere_then_refuse(stream: trio.SocketStream, seen: list[bytes]) -> None:
    """A proxy whose first tunnel leads to no TLS handshake, and which refuses the rest."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = await stream.receive_some()
        if not part:
            return
        data += part
    seen.append(data)
    if len(seen) > 1:
        await stream.send_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
        return
    await stream.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await trio.sleep_forever()


@pytest.mark.parametrize("api", ["chat", "messages"])
@pytest.mark.parametrize("connect_timeout", [0.2, 5.0])
async def test_a_tunnel_whose_handshake_failed_frees_its_connection(
    api: str, connect_timeout: float
) -> None:
    """R10.3: with one connection, a request whose tunnel's TLS handshake timed out (the
    connect timeout, or its own) leaves the pool its place: the next request asks the
    proxy for a tunnel of its own and fails at once on its refusal, where it waited
    for the first's connection, which was never freed, until its own timeout."""
    with trio.fail_after(30):
        async with raw_server(_tunnel_nowhere_then_refuse) as (proxy_url, connects):
            model = adapter(
                api,
                "https://provider.example",
                proxy=proxy_url,
                timeout=0.5,
                connect_timeout=connect_timeout,
                max_connections=1,
                pool_size=1,
            )
            async with model:
                first = await call_charged(model)
                started = trio.current_time()
                second = await call_charged(model)
                took = trio.current_time() - started
    assert first.error is not None
    assert first.error.code == "TIMEOUT"
    assert second.error is not None
    assert second.error.code == "CONNECTION_ERROR"
    assert "502 Bad Gateway" in second.error.message
    assert (len(connects), took < 0.4) == (2, True)
