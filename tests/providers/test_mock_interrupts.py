"""Ctrl-C reaches the caller of ``open_mock_server`` as itself, wherever it lands."""

from __future__ import annotations

import contextlib

import httpx2
import trio

from retinue.providers.mock import MockCall, MockResponse, open_mock_server

from ._mock_server_kit import REAL_DEADLINE


def _interrupted(_call: MockCall) -> MockResponse:
    # Trio raises Ctrl-C in whatever task runs when it comes: here, a connection's.
    raise KeyboardInterrupt


async def _serve_one_interrupted_request() -> BaseException | None:
    """What ``open_mock_server`` raises when Ctrl-C lands in a connection task."""
    try:
        async with (
            open_mock_server(_interrupted) as server,
            httpx2.AsyncClient(base_url=server.base_url) as client,
        ):
            with contextlib.suppress(httpx2.TransportError):  # the connection is closed
                await client.post("/v1/chat/completions", json={"model": "m", "messages": []})
            await trio.sleep_forever()  # until the interrupt cancels the block
    # Caught whole, a group too: one reaching pytest would end the whole run as Ctrl-C does.
    except BaseException as exc:
        return exc
    return None  # pragma: no cover - the block never ends on its own


async def test_ctrl_c_in_a_connection_task_leaves_the_server_bare() -> None:
    """A ``KeyboardInterrupt`` raised in one of the server's connection tasks comes out of
    ``open_mock_server`` as itself, as one raised in its block does. It came out inside
    a group of groups (the connection's nursery, the listeners', the server's own), which
    an ``except KeyboardInterrupt`` around the server does not catch."""
    with trio.fail_after(REAL_DEADLINE):
        raised = await _serve_one_interrupted_request()
    assert type(raised) is KeyboardInterrupt, repr(raised)
