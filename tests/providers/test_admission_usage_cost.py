"""Correcting a request's token charge costs the same however many were admitted after it."""

from __future__ import annotations

import contextlib
import time

import trio

from retinue.providers import AdmissionController, AdmissionLimits


async def test_usage_corrections_cost_the_same_however_full_the_window(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Streams end, oldest first, each reporting its usage while up to 10,000 admitted after it
    are still in the window: each correction searched them all from the newest, seconds in
    all, CPU a lane at thousands of requests a minute spent on its own bookkeeping."""
    admission = AdmissionController(AdmissionLimits(tokens_per_minute=1e12))
    count = 10_000
    with trio.fail_after(60):
        async with contextlib.AsyncExitStack() as stack:
            tickets = [
                await stack.enter_async_context(
                    admission.admit(provider="p", model="m", tokens=100)
                )
                for _ in range(count)
            ]
            started = time.perf_counter()
            for ticket in tickets:
                ticket.record_usage(150)
            elapsed = time.perf_counter() - started
            assert admission.statistics().lanes[0].tokens_in_window == 150 * count
    # Marked, this is a few hundredths of a second; searched, it was seconds.
    assert elapsed < 1.0, f"{count} corrections took {elapsed:.2f}s"


async def test_a_correction_after_the_charge_aged_out_leaves_the_window_alone(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Usage reported after the window has let its charge go is not subtracted again."""
    admission = AdmissionController(AdmissionLimits(tokens_per_minute=1000, window=10))
    with trio.fail_after(60):
        async with admission.admit(provider="p", model="m", tokens=400) as old:
            await trio.sleep(11)
            async with admission.admit(provider="p", model="m", tokens=300) as new:
                old.record_usage(900)
                new.record_usage(350)
                assert admission.statistics().lanes[0].tokens_in_window == 350
