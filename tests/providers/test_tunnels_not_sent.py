"""Through an HTTP proxy, an ``https`` request goes out only once the proxy's tunnel is
open and the provider's TLS handshake done: the ``CONNECT`` that asks for the tunnel
sends nothing to the provider. A request that failed before then was not sent."""

from __future__ import annotations

import pytest
import trio

from ._raw_servers_kit import Handler, adapter, call_charged, raw_server

_HEAD_END = b"\r\n\r\n"


async def _read_head(stream: trio.SocketStream) -> None:
    data = b""
    while _HEAD_END not in data:
        part = await stream.receive_some()
        if not part:
            return
        data += part


async def _never_answers(stream: trio.SocketStream, _seen: list[bytes]) -> None:
    """A proxy that reads the ``CONNECT`` and never answers it."""
    await _read_head(stream)
    await trio.sleep_forever()


async def _tunnels_nowhere(stream: trio.SocketStream, _seen: list[bytes]) -> None:
    """A proxy that opens the tunnel, behind which no TLS handshake is ever answered."""
    await _read_head(stream)
    await stream.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await trio.sleep_forever()


async def _refuses(stream: trio.SocketStream, _seen: list[bytes]) -> None:
    """A proxy that refuses the tunnel."""
    await _read_head(stream)
    await stream.send_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")


@pytest.mark.parametrize("api", ["chat", "messages"])
@pytest.mark.parametrize("proxy", [_never_answers, _tunnels_nowhere])
async def test_a_request_whose_tunnel_never_opened_timed_out_unsent(
    api: str, proxy: Handler
) -> None:
    """R12.9: a request whose proxy never answered its ``CONNECT``, or whose tunnel led to
    no TLS handshake, fails ``TIMEOUT`` as a connection not made and gives its admission
    charge back, where the ``CONNECT`` written whole counted as the request sent: the
    provider "sent no response headers", and the charge was kept."""
    with trio.fail_after(30):
        async with (
            raw_server(proxy) as (proxy_url, _),
            adapter(api, "https://provider.example", proxy=proxy_url, timeout=0.5) as model,
        ):
            charged = await call_charged(model)
    assert charged.error is not None
    assert charged.error.code == "TIMEOUT"
    assert "did not take a connection within 0.5 s" in charged.error.message
    assert charged.requests == 0


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_refused_tunnel_gives_the_charge_back(api: str) -> None:
    """R12.9: a proxy's 502 to the ``CONNECT`` fails ``CONNECTION_ERROR`` naming the
    proxy's refusal, and the request, which never reached the provider, counts nothing."""
    with trio.fail_after(30):
        async with (
            raw_server(_refuses) as (proxy_url, _),
            adapter(api, "https://provider.example", proxy=proxy_url, timeout=5.0) as model,
        ):
            charged = await call_charged(model)
    assert charged.error is not None
    assert charged.error.code == "CONNECTION_ERROR"
    assert "502 Bad Gateway" in charged.error.message
    assert charged.requests == 0
