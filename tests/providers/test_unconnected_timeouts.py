"""A request whose timeout ends before it is written whole was never sent: it fails
``POOL_TIMEOUT`` when it waited for a free connection, else as a connection not made, and
admission gives its charge back. A server that accepts connections but never completes a
TLS handshake holds such a request where no byte of it leaves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ManagedModel,
    ProviderError,
    RetryPolicy,
    manage,
)
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel

from .support import collect, make_request


@asynccontextmanager
async def _silent_tls_server() -> AsyncIterator[str]:
    """The base URL of an ``https`` server whose connections are made but never answered:
    the kernel completes them, nothing reads them, so no TLS handshake ends."""
    listener = trio.socket.socket()
    with listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        host, port = listener.getsockname()
        yield f"https://{host}:{port}"


def _one_connection(api: str, base_url: str) -> OpenAIModel | AnthropicModel:
    if api == "messages":
        return AnthropicModel(
            base_url=base_url, api_key="k", max_connections=1, pool_size=1, timeout=1.0
        )
    return OpenAIModel(
        base_url=f"{base_url}/v1", api_key="k", max_connections=1, pool_size=1, timeout=1.0
    )


async def _fail(managed: ManagedModel, session_id: str, errors: dict[str, ProviderError]) -> None:
    try:
        await collect(managed, make_request("hello " * 20, session_id=session_id))
    except ProviderError as exc:
        errors[session_id] = exc


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_request_whose_connection_was_not_ready_in_time_was_not_sent(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: with one connection and a 1 s timeout, the first request times out on a
    connection never made, and the second, given that connection as the first gives up,
    times out while it is being made: neither reached the server, so the first fails as
    a connection not made and the second as ``POOL_TIMEOUT``, and neither keeps its
    admission charge. The second was reported ``TIMEOUT``, blaming a server that sent no
    headers, and both kept their charges."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=10))
    errors: dict[str, ProviderError] = {}
    with trio.fail_after(30):
        async with _silent_tls_server() as base_url:
            model = _one_connection(api, base_url)
            managed = manage(model, retry=RetryPolicy(max_attempts=1), admission=admission)
            async with model, trio.open_nursery() as nursery:
                nursery.start_soon(_fail, managed, "first", errors)
                await trio.sleep(0.2)
                nursery.start_soon(_fail, managed, "second", errors)
    first, second = errors["first"], errors["second"]
    assert first.code == "TIMEOUT"
    assert "did not take a connection within 1.0 s" in first.message
    assert second.code == "POOL_TIMEOUT"
    assert "in use until too late to send the request whole" in second.message
    assert admission.statistics().lanes[0].requests_in_window == 0
