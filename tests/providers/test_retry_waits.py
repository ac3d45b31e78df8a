"""Retry waits: a Retry-After that asks for no wait, and policy values that are not finite."""

from __future__ import annotations

import math
import random
from itertools import pairwise
from typing import Any

import pytest
import trio

from retinue._stream import STOP, Finish, TextDelta, Usage, UsageChunk
from retinue.providers import ManagedModel, ProviderError, RetryNotice, RetryPolicy
from retinue.providers._failures import status_error

from .support import FakeModel, collect, make_request

OK = [TextDelta(0, "hi"), UsageChunk(Usage(10, 2)), Finish(STOP)]


def _unavailable(retry_after: str) -> ProviderError:
    """A 503 as the adapters raise it, with the given ``retry-after`` header."""
    return status_error(
        503, {"error": {"message": "busy"}}, {"retry-after": retry_after}, provider="p"
    )


@pytest.mark.parametrize("retry_after", ["0", "Thu, 01 Jan 1970 00:00:00 GMT"])
async def test_a_retry_after_asking_for_no_wait_gets_the_backoff(
    retry_after: str, autojump_clock: trio.abc.Clock
) -> None:
    """A ``Retry-After`` of 0 or a date already past is not obeyed as "retry at once":
    each retry waits the policy's jittered backoff, as the official SDKs do."""
    policy = RetryPolicy(base_delay=0.5)
    inner = FakeModel([_unavailable(retry_after)] * 3 + [OK])
    notices: list[RetryNotice] = []
    model = ManagedModel(inner, retry=policy, on_retry=notices.append, rng=random.Random(5))
    with trio.fail_after(100):
        await collect(model, make_request("hi"))
    draws = random.Random(5)
    expected = [policy.delay(attempt, None, draws) for attempt in (1, 2, 3)]
    assert [notice.delay for notice in notices] == expected
    assert all(delay > 0 for delay in expected)
    waits = [later - earlier for earlier, later in pairwise(inner.started)]
    assert waits == pytest.approx(expected)


def test_a_positive_retry_after_still_wins_over_the_backoff() -> None:
    """A positive ``Retry-After`` is the delay, capped at ``max_retry_after``."""
    policy = RetryPolicy(max_retry_after=30.0)
    assert policy.delay(1, _unavailable("0.25")) == 0.25
    assert policy.delay(1, _unavailable("3600")) == 30.0


@pytest.mark.parametrize("field", ["base_delay", "max_delay", "max_retry_after"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0])
def test_retry_policy_refuses_waits_that_are_not_finite_and_non_negative(
    field: str, value: float
) -> None:
    """Every wait of the policy is a finite number of seconds >= 0, as AdmissionLimits
    requires of its values: NaN or infinity is refused naming the field and the value."""
    options: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=rf"RetryPolicy\.{field} .*{value!r}"):
        RetryPolicy(**options)


def test_retry_policy_accepts_zero_waits() -> None:
    """Zero waits (retry at once) stay allowed: they are finite and not negative."""
    policy = RetryPolicy(base_delay=0.0, max_delay=0.0, max_retry_after=0.0)
    assert policy.delay(3, None) == 0.0
