"""A failed response whose rate-limit headers report a spent budget: the lane and the retry
wait for the budget's reset, as they do after a successful response saying the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import trio

from retinue.providers import (
    AdmissionController,
    ProviderStatusError,
    RetryNotice,
    RetryPolicy,
    manage,
)
from retinue.providers._failures import status_error
from retinue.providers.mock import MockReply, MockServer, RawReply, ScriptedPolicy

from .support import JSON, collect, make_request, mock_adapter

VIRTUAL_DEADLINE = 600.0
RESET = 30.0
OPENAI_SPENT = (
    ("x-ratelimit-limit-requests", "500"),
    ("x-ratelimit-remaining-requests", "0"),
    ("x-ratelimit-reset-requests", "30s"),
)
RATE_LIMITED = json.dumps(
    {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}}
).encode()


def _spent_headers(api: str) -> tuple[tuple[str, str], ...]:
    """Headers saying the request budget is spent for 30 s, as *api*'s provider sends them."""
    if api != "messages":
        return OPENAI_SPENT
    # Anthropic gives the reset as a moment, not a duration.
    reset = datetime.now(UTC) + timedelta(seconds=RESET)
    return (
        ("anthropic-ratelimit-requests-limit", "50"),
        ("anthropic-ratelimit-requests-remaining", "0"),
        ("anthropic-ratelimit-requests-reset", reset.isoformat()),
    )


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("status", [429, 500])
async def test_a_failed_response_reporting_a_spent_budget_pauses_the_lane_until_its_reset(
    api: str, status: int, autojump_clock: trio.abc.Clock
) -> None:
    """The rate-limit headers of an error response are read as a success's are: a budget
    at 0 pauses the lane until its reset, not for a 429's default second (or not at all)."""
    reply = RawReply(status, JSON + _spent_headers(api), RATE_LIMITED)
    admission = AdmissionController()
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter(api, MockServer(ScriptedPolicy([reply]))) as adapter:
            model = manage(adapter, retry=RetryPolicy(max_attempts=1), admission=admission)
            with pytest.raises(ProviderStatusError):
                await collect(model, make_request("hi"))
    assert admission.statistics().lanes[0].paused_for == pytest.approx(RESET, abs=1.0)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_retry_after_a_429_reporting_a_spent_budget_waits_for_its_reset(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """A 429 without ``Retry-After`` whose headers say the budget is back in 30 s is retried
    after those 30 s, not after a backoff of a fraction of a second that would meet
    another 429; with no admission control to hold the retry back either."""
    reply = RawReply(429, JSON + _spent_headers(api), RATE_LIMITED)
    server = MockServer(ScriptedPolicy([reply, MockReply(text="ok")]))
    notices: list[RetryNotice] = []
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter(api, server) as adapter:
            model = manage(adapter, retry=RetryPolicy(), on_retry=notices.append)
            start = trio.current_time()
            await collect(model, make_request("hi"))
            waited = trio.current_time() - start
    assert [notice.delay for notice in notices] == [pytest.approx(RESET, abs=1.0)]
    assert waited == pytest.approx(RESET, abs=1.0)


def test_a_spent_budget_is_the_wait_only_when_the_provider_asks_for_none() -> None:
    """A 429's wait is its ``Retry-After`` when it has one, else the spent budget's reset
    (the longer one, when both budgets are spent); a spent quota names no wait."""
    headers = dict(OPENAI_SPENT)
    assert status_error(429, RATE_LIMITED, headers, provider="p").retry_after == RESET
    asked = {**headers, "retry-after": "2"}
    assert status_error(429, RATE_LIMITED, asked, provider="p").retry_after == 2.0
    both = {**headers, "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m"}
    assert status_error(429, RATE_LIMITED, both, provider="p").retry_after == 60.0
    quota = {"error": {"message": "quota", "code": "insufficient_quota"}}
    assert status_error(429, quota, headers, provider="p").retry_after is None
