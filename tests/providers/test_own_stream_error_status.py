"""A model's own ``ProviderStreamError`` with a numeric code is read as the adapters read an
error event's: the code is its status, which the retry policy and the admission lanes
judge, so a ``"429"`` throttles the lane as a rate limit does and a policy's own
``retryable_statuses`` decide its retries."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

import pytest
import trio
import trio.testing

from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ProviderError,
    ProviderStreamError,
    RetryPolicy,
    StreamChunk,
    manage,
)

from .support import FakeModel, make_request


async def _attempts(
    error: ProviderError, retry: RetryPolicy, admission: AdmissionController
) -> int:
    model = FakeModel(attempts=[error, error, error])
    managed = manage(model, retry=retry, admission=admission)
    with pytest.raises(ProviderError):
        await _drain(managed.stream(make_request("hi")))
    return len(model.started)


async def _drain(chunks: AsyncGenerator[StreamChunk, None]) -> None:
    async with aclosing(chunks) as stream:
        async for _ in stream:
            pass


def test_a_numeric_code_is_the_errors_status() -> None:
    """R10.8: ``code="503"`` without a status reads status 503; a given status stands."""
    assert ProviderStreamError("busy", code="503").status == 503
    assert ProviderStreamError("x", code="503", status=500).status == 500
    assert ProviderStreamError("x", code="rate_limit_exceeded").status is None


async def test_an_own_rate_limit_code_throttles_the_lane(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R10.8: retried three times, a model's own ``"429"`` pauses the lane and cuts its
    concurrency each time, as the adapters' in-stream 429 does; it was retried at once
    and left the lane's limits alone."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=100, max_concurrent=8))
    retry = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)
    with trio.fail_after(60):
        attempts = await _attempts(ProviderStreamError("slow down", code="429"), retry, admission)
    [lane] = admission.statistics().lanes
    assert attempts == 3
    assert lane.throttled == 3
    assert lane.concurrency_limit < 8


async def test_a_policys_own_statuses_judge_an_own_numeric_code(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R10.8: a policy retrying only 429 tries a model's own ``"503"`` once, as it does the
    adapters' 503; it retried it by the default statuses."""
    retry = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, retryable_statuses={429})
    with trio.fail_after(60):
        attempts = await _attempts(
            ProviderStreamError("busy", code="503"), retry, AdmissionController()
        )
    assert attempts == 1
