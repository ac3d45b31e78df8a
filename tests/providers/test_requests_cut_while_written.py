"""A server that closes the connection before it took the whole request had no request
to act on: the failure is marked unsent, and admission gives its charge back."""

from __future__ import annotations

import pytest
import trio

from ._raw_servers_kit import BIG_TEXT, adapter, call_charged, raw_server


async def _close_mid_request(stream: trio.SocketStream, _seen: list[bytes]) -> None:
    """Read part of the request, then close the connection."""
    taken = 0
    while taken < 200_000:
        part = await stream.receive_some(65536)
        if not part:
            return
        taken += len(part)
    await stream.aclose()


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_connection_closed_mid_request_gives_the_charge_back(api: str) -> None:
    """R12.9: a request whose server closed the connection while its body was written
    fails ``CONNECTION_ERROR`` and counts nothing in its lane, where it kept its charge
    as a request sent."""
    with trio.fail_after(30):
        async with (
            raw_server(_close_mid_request) as (base_url, seen),
            adapter(api, base_url, timeout=5.0) as model,
        ):
            charged = await call_charged(model, text=BIG_TEXT)
    assert charged.error is not None
    assert (charged.error.code, charged.requests, seen) == ("CONNECTION_ERROR", 0, [])
