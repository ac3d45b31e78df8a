"""A caller's cancel (an agent's abort, an outer deadline) that ends a request before it
was written whole gives its admission charge back: the provider had no request to count.
One that ends a request the server read whole keeps it."""

from __future__ import annotations

import pytest
import trio

from ._raw_servers_kit import (
    BIG_TEXT,
    adapter,
    call_charged,
    never_read,
    raw_server,
    read_then_hang,
    silent_listener,
)

APIS = ["chat", "messages"]


@pytest.mark.parametrize("api", APIS)
async def test_a_cancel_in_the_tls_handshake_gives_the_charge_back(api: str) -> None:
    """R12.9: cancelled while its connection's TLS handshake was not done, the request
    counts nothing, where it kept its charge for the window."""
    with trio.fail_after(30):
        async with (
            silent_listener() as address,
            adapter(api, f"https://{address}", timeout=5.0) as model,
        ):
            charged = await call_charged(model, cancel_after=0.2)
    assert (charged.cancelled, charged.requests) == (True, 0)


@pytest.mark.parametrize("api", APIS)
async def test_a_cancel_while_the_body_is_not_taken_gives_the_charge_back(api: str) -> None:
    """R12.9: cancelled while a server that reads nothing holds its body half written,
    the request counts nothing."""
    with trio.fail_after(30):
        async with (
            raw_server(never_read) as (base_url, seen),
            adapter(api, base_url, timeout=5.0) as model,
        ):
            charged = await call_charged(model, text=BIG_TEXT, cancel_after=0.2)
    assert (charged.cancelled, charged.requests, seen) == (True, 0, [])


@pytest.mark.parametrize("api", APIS)
async def test_a_cancel_while_waiting_for_a_connection_gives_the_charge_back(api: str) -> None:
    """R12.9: with its one connection held by a request the server read and never
    answered, a second request cancelled while it waits for that connection counts
    nothing; the first, read whole, keeps its charge."""
    with trio.fail_after(30):
        async with raw_server(read_then_hang) as (base_url, seen):
            model = adapter(api, base_url, timeout=5.0, max_connections=1, pool_size=1)
            async with model, trio.open_nursery() as nursery:
                held: list[object] = []

                async def hold() -> None:
                    held.append(await call_charged(model, cancel_after=0.6, session_id="a"))

                nursery.start_soon(hold)
                await trio.sleep(0.2)
                waiter = await call_charged(model, cancel_after=0.1, session_id="b")
    assert (waiter.cancelled, waiter.requests, len(seen)) == (True, 0, 1)


@pytest.mark.parametrize("api", APIS)
async def test_a_cancel_after_the_request_was_read_keeps_the_charge(api: str) -> None:
    """A request the server read whole may have been counted: cancelled while it waits
    for the response's headers, it keeps its charge."""
    with trio.fail_after(30):
        async with (
            raw_server(read_then_hang) as (base_url, seen),
            adapter(api, base_url, timeout=5.0) as model,
        ):
            charged = await call_charged(model, cancel_after=0.3)
    assert (charged.cancelled, charged.requests, len(seen)) == (True, 1, 1)
