"""Concurrency limits past a float's range: refused where they are built, naming the field."""

from __future__ import annotations

import pytest
import trio

from retinue.providers import AdmissionController, AdmissionLimits


@pytest.mark.parametrize("field", ["max_concurrent", "min_concurrent"])
def test_a_concurrency_limit_past_a_float_s_range_is_refused_naming_it(field: str) -> None:
    """A lane keeps its limit as a float: 10**400 is refused when built, not left to fail
    its first admission."""
    with pytest.raises(ValueError, match=f"AdmissionLimits.{field} must be positive and within"):
        AdmissionLimits(**{field: 10**400})


async def test_the_largest_concurrency_limit_a_float_holds_admits(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A huge limit within a float's range is no limit to speak of: requests go through."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=10**300, min_concurrent=10**300))
    with trio.fail_after(10):
        async with admission.admit(provider="p", model="m") as ticket:
            ticket.rate_limited(None)
    assert admission.statistics().lanes[0].concurrency_limit == float(10**300)


@pytest.mark.parametrize("window", [None, "60"], ids=["none", "str"])
def test_a_window_that_is_no_number_is_refused_naming_it(window: object) -> None:
    """The window has no unlimited value: ``None`` is refused when built, where it was
    taken and every admission to the lane after its first failed with a TypeError."""
    with pytest.raises(TypeError, match=r"AdmissionLimits\.window must be a number"):
        AdmissionLimits(requests_per_minute=10, window=window)  # type: ignore[arg-type]
