"""Closing an adapter while its streams read their bodies: each fails ``ADAPTER_CLOSED``,
not retried, as a request waiting for a connection or its headers does."""

from __future__ import annotations

from contextlib import aclosing

import pytest
import trio

from retinue.providers import ProviderError, RetryPolicy, manage
from retinue.providers.mock import EchoPolicy, Timing, open_mock_server

from .support import make_request, served_by

REAL_DEADLINE = 20.0
BOTH_SDKS = pytest.mark.parametrize("api", ["chat", "responses", "messages"])


@BOTH_SDKS
async def test_a_stream_cut_by_its_adapters_close_fails_adapter_closed(api: str) -> None:
    """R12.9: a stream whose first chunk is out when its adapter closes fails
    ``ADAPTER_CLOSED``, not retryable, rather than as a cut stream (``STREAM_TRUNCATED``,
    retryable), which a retry policy would retry against the closed adapter."""
    errors: list[ProviderError] = []
    started = trio.Event()

    async def read() -> None:
        async with aclosing(model.stream(make_request("hello " * 20))) as chunks:
            try:
                async for _ in chunks:
                    started.set()
            except ProviderError as exc:
                errors.append(exc)

    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(
            EchoPolicy(chunks=40), timing=Timing(inter_chunk=0.2)
        ) as server:
            model = served_by(api, server, timeout=30.0)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                await started.wait()
                await model.aclose()
    assert [(error.code, error.retryable) for error in errors] == [("ADAPTER_CLOSED", False)]


async def test_a_managed_stream_cut_by_its_adapters_close_is_not_retried() -> None:
    """R12.9: under a retry policy, a stream cut by its adapter's close before its first
    chunk fails ``ADAPTER_CLOSED`` after one attempt, with no backoff."""
    errors: list[ProviderError] = []

    async def read() -> None:
        try:
            async with aclosing(managed.stream(make_request("hello"))) as chunks:
                async for _ in chunks:
                    pass
        except ProviderError as exc:
            errors.append(exc)

    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(EchoPolicy(chunks=4), timing=Timing(first_token=5.0)) as server:
            model = served_by("chat", server, timeout=30.0)
            managed = manage(model, retry=RetryPolicy(max_attempts=3, base_delay=10.0))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                # The headers are out; the first chunk is seconds away.
                await trio.sleep(0.5)
                await model.aclose()
                closed_at = trio.current_time()
            ended_in = trio.current_time() - closed_at
    assert [error.code for error in errors] == ["ADAPTER_CLOSED"]
    assert managed.statistics().attempts == 1
    assert ended_in < 2.0
