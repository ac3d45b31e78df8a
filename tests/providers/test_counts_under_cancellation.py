"""Counters that stay true when a request is cancelled: a retry counts once it is made,
and a lane's longest wait counts the waits given up too."""

from __future__ import annotations

import pytest
import trio

from retinue._stream import STOP, Finish, TextDelta, Usage, UsageChunk
from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ManagedStatistics,
    RateLimitError,
    RetryPolicy,
    manage,
)

from .support import FakeModel, collect, make_request

OK = [TextDelta(0, "hi"), UsageChunk(Usage(10, 2)), Finish(STOP)]


def _rate_limited(after: float) -> RateLimitError:
    return RateLimitError("slow", status=429, retry_after=after, retryable=True)


async def test_a_retry_cancelled_in_its_wait_is_not_counted(
    autojump_clock: trio.abc.Clock,
) -> None:
    """``retries`` counts retries made: a request cancelled while it waits out its
    ``Retry-After`` made one attempt and no retry."""
    fake = FakeModel([_rate_limited(5.0), OK])
    model = manage(fake, retry=RetryPolicy(), admission=AdmissionController())
    with trio.fail_after(60):
        with trio.move_on_after(1.0):
            await collect(model, make_request("hi"))
    assert len(fake.started) == 1
    assert model.statistics() == ManagedStatistics(requests=1, attempts=1, retries=0, failures=0)


async def test_a_retry_cancelled_while_waiting_for_admission_is_not_counted(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A retry still waiting for admission when it is cancelled reached no provider: it is
    neither an attempt nor a retry."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))
    fake = FakeModel([_rate_limited(0.5), OK])
    model = manage(fake, retry=RetryPolicy(), admission=admission)

    async def hold() -> None:
        # Queued during the 429's pause, ahead of the retry: it takes the one place.
        await trio.sleep(0.1)
        async with admission.admit(provider="fake", model="test-model", session_id="holder"):
            await trio.sleep(10.0)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            with trio.move_on_after(2.0):
                await collect(model, make_request("hi", session_id="retried"))
    assert len(fake.started) == 1
    assert model.statistics() == ManagedStatistics(requests=1, attempts=1, retries=0, failures=0)


async def test_a_retry_made_is_counted_once(autojump_clock: trio.abc.Clock) -> None:
    """A retry that reaches the provider counts once, whether admission is on or off."""
    for admission in (None, AdmissionController()):
        model = manage(
            FakeModel([_rate_limited(1.0), OK]), retry=RetryPolicy(), admission=admission
        )
        with trio.fail_after(60):
            await collect(model, make_request("hi"))
        assert model.statistics() == ManagedStatistics(
            requests=1, attempts=2, retries=1, failures=0
        )


async def test_a_lane_s_longest_wait_counts_a_wait_given_up(
    autojump_clock: trio.abc.Clock,
) -> None:
    """``max_wait`` is the longest any request waited for admission: a request that gave up
    after 3 s waited 3 s, though it was never admitted."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))

    async def hold() -> None:
        async with admission.admit(provider="p", model="m", session_id="holder"):
            await trio.sleep(10.0)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.sleep(1.0)
            with trio.move_on_after(3.0):
                async with admission.admit(provider="p", model="m", session_id="waiter"):
                    pass
        lane = admission.statistics().lanes[0]
    assert lane.max_wait == pytest.approx(3.0)
    assert (lane.waiting, lane.admitted) == (0, 1)
