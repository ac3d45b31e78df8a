"""Correcting a request's token charge costs the same however many were admitted after it."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator

import trio

from retinue.providers import AdmissionController, AdmissionLimits
from retinue.providers._lanes import Charge


class _CountedCharges(deque[Charge]):
    """A window's charges, counting each one a search of them visits (the newest or the
    oldest one, read to prune or admit, are not a search)."""

    def __init__(self, charges: deque[Charge]) -> None:
        super().__init__(charges)
        self.visited = 0

    def __iter__(self) -> Iterator[Charge]:
        for charge in super().__iter__():
            self.visited += 1
            yield charge

    def __reversed__(self) -> Iterator[Charge]:
        for charge in super().__reversed__():
            self.visited += 1
            yield charge

    # A search in C (``in``, ``index``, ``count``, ``remove``) calls none of the above:
    # each counts as visiting every charge.
    def __contains__(self, charge: object) -> bool:
        self.visited += len(self)
        return super().__contains__(charge)

    def index(self, charge: Charge, *bounds: int) -> int:
        self.visited += len(self)
        return super().index(charge, *bounds)

    def count(self, charge: Charge) -> int:
        self.visited += len(self)
        return super().count(charge)

    def remove(self, charge: Charge) -> None:
        self.visited += len(self)
        super().remove(charge)

    def __getitem__(self, index: int) -> Charge:  # type: ignore[override]
        # The oldest and the newest are read to prune and to admit; any other is a search.
        if index not in (0, -1):
            self.visited += 1
        return super().__getitem__(index)


async def test_usage_corrections_visit_none_of_the_charges_admitted_after_them(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Streams end, oldest first, each reporting its usage while up to 2,000 admitted after it
    are still in the window: each correction searched them from the newest (two million
    visits for these, seconds for 10,000), CPU a lane at thousands of requests a minute
    spent on its own bookkeeping. Counted, not timed, so no machine is fast enough to pass
    with the search."""
    admission = AdmissionController(AdmissionLimits(tokens_per_minute=1e12))
    count = 2000
    with trio.fail_after(60):
        async with contextlib.AsyncExitStack() as stack:
            tickets = [
                await stack.enter_async_context(
                    admission.admit(provider="p", model="m", tokens=100)
                )
                for _ in range(count)
            ]
            [lane] = admission._lanes.values()
            assert lane.tokens is not None
            charges = lane.tokens.charges = _CountedCharges(lane.tokens.charges)
            for ticket in tickets:
                ticket.record_usage(150)
            assert admission.statistics().lanes[0].tokens_in_window == 150 * count
    assert charges.visited == 0


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
