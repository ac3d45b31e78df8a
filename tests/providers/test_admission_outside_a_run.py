"""An admission controller's statistics read outside a trio run: after ``trio.run``
returns, say, to report what the run did."""

from __future__ import annotations

import trio
import trio.testing

from retinue.providers import AdmissionController, AdmissionLimits


def test_statistics_are_read_outside_a_trio_run() -> None:
    """``statistics()`` never blocks and needs no trio run: outside one it reads each lane
    as of the last run's time, plus the real time since, where it raised RuntimeError."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=10))
    assert admission.statistics().lanes == ()

    async def admit_and_throttle() -> None:
        async with admission.admit(provider="p", model="m") as ticket:
            ticket.rate_limited(30.0)

    trio.run(admit_and_throttle, clock=trio.testing.MockClock(autojump_threshold=0))
    (lane,) = admission.statistics().lanes
    assert (lane.provider, lane.model, lane.admitted, lane.throttled) == ("p", "m", 1, 1)
    assert lane.requests_in_window == 1
    assert 0.0 < lane.paused_for <= 30.0


def test_statistics_read_from_a_worker_thread_leave_the_run_s_charges() -> None:
    """A read from a ``trio.to_thread`` worker, outside the run though it goes on, changes
    nothing the run keeps: a charge whose window the read's estimated time is past still
    counts in the run, whose clock has not moved, and the run's own read still sees it."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=1, window=1e-9))
    # The run's clock stands still; the worker's estimate moves on with the real time.
    clock = trio.testing.MockClock()

    async def admit_then_read_from_a_worker() -> tuple[int, int]:
        async with admission.admit(provider="p", model="m"):
            pass
        (from_worker,) = (await trio.to_thread.run_sync(admission.statistics)).lanes
        (in_run,) = admission.statistics().lanes
        return from_worker.requests_in_window, in_run.requests_in_window

    assert trio.run(admit_then_read_from_a_worker, clock=clock) == (0, 1)
