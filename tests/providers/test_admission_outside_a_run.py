"""An admission controller's statistics read outside a trio run: after ``trio.run``
returns, say, to report what the run did."""

from __future__ import annotations

import time

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


def test_statistics_read_from_another_trio_run_leave_the_run_s_charges() -> None:
    """A read from a worker thread's own ``trio.run`` neither carries the lanes over to that
    run's clock nor ages out what the admitting run still counts: after three such reads the
    run's own read, its clock standing still, still sees its charge, where each carry-over
    counted the real time passed and aged it out."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=1, window=0.5))
    clock = trio.testing.MockClock()

    async def read() -> int:
        await trio.lowlevel.checkpoint()
        (lane,) = admission.statistics().lanes
        return lane.requests_in_window

    def read_in_a_run_of_its_own() -> int:
        # Real time passes, which a carry-over between the runs' clocks counts as passed.
        time.sleep(0.2)  # noqa: TID251 - a worker thread, not the run
        return trio.run(read)

    async def admit_then_read_from_other_runs() -> tuple[list[int], int]:
        async with admission.admit(provider="p", model="m"):
            pass
        seen = [await trio.to_thread.run_sync(read_in_a_run_of_its_own) for _ in range(3)]
        (in_run,) = admission.statistics().lanes
        return seen, in_run.requests_in_window

    _, in_run = trio.run(admit_then_read_from_other_runs, clock=clock)
    assert in_run == 1
