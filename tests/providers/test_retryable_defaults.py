"""A provider error built without ``retryable`` says what the retry policy does with it: a
rate limit, an overload, a connection failure and a retried status are retryable, as the
errors the adapters raise are; a stream error is as its code is."""

from __future__ import annotations

import pytest
import trio

from retinue._stream import STOP, Finish, TextDelta
from retinue.providers import (
    AuthenticationError,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    ProviderStreamError,
    RateLimitError,
    RetryPolicy,
    manage,
)

from .support import FakeModel, collect, make_request

RETRIED = [
    RateLimitError("slow down"),
    RateLimitError("slow down", status=429),
    OverloadedError("busy"),
    OverloadedError("busy", status=529),
    ProviderConnectionError("reset"),
    ProviderStatusError("bad gateway", status=502),
    ProviderStreamError("busy", code="overloaded_error"),
    ProviderStreamError("busy", code="503"),
    ProviderStreamError("failing", code="500"),
    ProviderStreamError("slow down", code="429"),
    ProviderStreamError("garbled", code="MALFORMED_RESPONSE"),
]
FINAL = [
    ProviderError("failed"),
    ProviderStatusError("bad request", status=400),
    ProviderStatusError("not implemented", status=501),
    AuthenticationError("no", status=401),
    RateLimitError("spent", status=429, code="QUOTA_EXHAUSTED"),
    OverloadedError("busy", status=529, headers={"x-should-retry": "false"}),
    ProviderStreamError("garbled"),
    ProviderStreamError("bad request", code="400"),
    ProviderStreamError("not implemented", code="501"),
]


async def _retried(error: ProviderError) -> bool:
    """Whether a managed call whose first attempt fails with *error* is tried again."""
    model = FakeModel([error, [TextDelta(0, "hi"), Finish(STOP)]])
    managed = manage(model, retry=RetryPolicy(max_attempts=2, base_delay=0.0))
    try:
        await collect(managed, make_request("hi"))
    except ProviderError:
        return False
    return True


@pytest.mark.parametrize(
    "error",
    RETRIED + FINAL,
    ids=lambda error: f"{type(error).__name__}-{error.status}-{error.code}",
)
async def test_retryable_says_what_the_retry_policy_does(
    error: ProviderError, autojump_clock: trio.abc.Clock
) -> None:
    """``retryable`` unless given is whether the default policy retries the error, and
    the policy does what it says: a ``RateLimitError("x")`` read ``False`` and was not
    retried, and ``RateLimitError("x", status=429)`` read ``False`` and was; a
    ``ProviderStreamError`` coded ``"503"`` or ``MALFORMED_RESPONSE`` read ``False``
    and was not retried, though both are retried from an adapter's stream."""
    with trio.fail_after(10):
        retried = await _retried(error)
    assert error.retryable is (error in RETRIED)
    assert retried is error.retryable


def test_a_retryable_given_is_kept() -> None:
    """A caller's own judgement stands over the one its class would make."""
    assert RateLimitError("slow down", retryable=False).retryable is False
    assert ProviderError("flaky", retryable=True).retryable is True


def test_a_rate_limit_naming_a_spent_quota_without_a_status_is_not_retryable() -> None:
    """R10.3: a spent quota named by its code alone is final, as with a 429 status."""
    assert RateLimitError("spent", code="QUOTA_EXHAUSTED").retryable is False


async def test_a_spent_quota_without_a_status_is_not_retried() -> None:
    """R10.3: the default policy does not retry a spent quota named by its code alone."""
    assert not await _retried(RateLimitError("spent", code="QUOTA_EXHAUSTED"))
