"""A ticket's observe_headers checks its max_pause as admit checks its own."""

from __future__ import annotations

import math

import pytest
import trio

from retinue.providers import AdmissionController

SPENT = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "5s"}


@pytest.mark.parametrize(
    ("cap", "error"),
    [(math.nan, ValueError), (-1.0, ValueError), (True, TypeError), ("5", TypeError)],
)
async def test_observe_headers_refuses_a_max_pause_that_is_no_cap(
    cap: object, error: type[Exception], autojump_clock: trio.abc.Clock
) -> None:
    """A NaN or negative cap, which would pause for no reset at all, or a str, which would
    fail with a bare comparison, is refused."""
    admission = AdmissionController()
    async with admission.admit(provider="p", model="m") as ticket:
        with pytest.raises(error, match="max_pause must be a number of seconds"):
            ticket.observe_headers(SPENT, max_pause=cap)  # type: ignore[arg-type]


async def test_observe_headers_refuses_headers_that_are_no_mapping(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Pairs are not headers it can read: they are refused with a TypeError, not an
    AttributeError."""
    admission = AdmissionController()
    async with admission.admit(provider="p", model="m") as ticket:
        with pytest.raises(TypeError, match="headers must be a mapping"):
            ticket.observe_headers(list(SPENT.items()))  # type: ignore[arg-type]


async def test_observe_headers_still_pauses_within_a_zero_or_infinite_cap(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Infinity is no cap, and a reset further off than the cap pauses nothing."""
    admission = AdmissionController()
    async with admission.admit(provider="p", model="m") as ticket:
        ticket.observe_headers(SPENT, max_pause=0)
        assert admission.statistics().lanes[0].paused_for == 0
        ticket.observe_headers(SPENT, max_pause=math.inf)
        assert admission.statistics().lanes[0].paused_for == 5
