"""A lane's names of another kind are refused by admit and rate_limited, naming the argument."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from retinue.providers import AdmissionController, AdmissionLimits


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ({"provider": 5, "model": "m"}, "provider must be None or a str, not 5"),
        ({"provider": "p", "model": None}, "model must be a str, not None"),
        ({"provider": "p", "model": "m", "session_id": ["s"]}, "session_id must be None or a str"),
    ],
    ids=["provider", "model", "session"],
)
async def test_admit_refuses_names_of_another_kind_and_leaves_no_lane(
    names: dict[str, Any], message: str, autojump_clock: trio.abc.Clock
) -> None:
    """A provider of 5 opens no lane no limits can name, and a session that is a list does
    not fail with "unhashable type" once queued: each is refused, naming the argument."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))
    with trio.fail_after(10), pytest.raises(TypeError, match=message):
        async with admission.admit(**names):
            pass
    assert admission.statistics().lanes == ()


async def test_rate_limited_refuses_a_model_of_another_kind(autojump_clock: trio.abc.Clock) -> None:
    """No lane is paused under a name no request has."""
    admission = AdmissionController()
    with pytest.raises(TypeError, match="model must be a str"):
        admission.rate_limited("p", 7, 1.0)  # type: ignore[arg-type]
    assert admission.statistics().lanes == ()
