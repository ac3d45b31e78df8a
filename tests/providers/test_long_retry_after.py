"""A provider asking for a longer wait than ``max_retry_after`` ends the retries at once.

A retry before the wait it asks for would only be refused again: with a daily
quota's ``Retry-After: 3600`` the policy would spend its attempts on waits of
``max_retry_after`` each, every one bound to fail. The request fails at once
with the provider's error, its ``retry_after`` kept for the caller, and its
admission lane holds the requests behind it back no longer than for a 429
that names no wait.
"""

from __future__ import annotations

import json

import pytest
import trio

import retinue
from retinue.providers import (
    ProviderError,
    RateLimitError,
    RetryNotice,
    RetryPolicy,
    manage,
)
from retinue.providers.mock import (
    EchoPolicy,
    FaultPolicy,
    MockReply,
    MockServer,
    RawReply,
    ScriptedPolicy,
)

from .support import JSON, SSE, collect, make_request, mock_adapter, one_after_another, sse_body

VIRTUAL_DEADLINE = 10_000.0
HOUR = 3600.0
BODY = b'{"error": {"message": "Rate limit reached", "type": "requests"}}'
SPENT_FOR_SIX_HOURS = (
    ("x-ratelimit-remaining-requests", "0"),
    ("x-ratelimit-reset-requests", "6h"),
)
CHAT_STREAM = sse_body(
    json.dumps(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
        }
    ).encode(),
    b"[DONE]",
)


def _throttled(retry_after: float) -> FaultPolicy:
    """Every call answered with a 429 asking for *retry_after* seconds."""
    return FaultPolicy(EchoPolicy(), rate=1.0, kinds=("rate_limit",), retry_after=retry_after)


async def _fails(
    api: str, server: MockServer, policy: RetryPolicy, notices: list[RetryNotice]
) -> tuple[ProviderError, float, int]:
    """The error a managed request over *server* fails with, the virtual seconds it took
    and the attempts it made."""
    async with mock_adapter(api, server) as adapter:
        model = manage(adapter, retry=policy, on_retry=notices.append)
        start = trio.current_time()
        with trio.fail_after(VIRTUAL_DEADLINE), pytest.raises(ProviderError) as caught:
            await collect(model, make_request("hi"))
        return caught.value, trio.current_time() - start, model.statistics().attempts


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_retry_after_past_max_retry_after_fails_the_request_at_once(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """The default policy makes one attempt against ``Retry-After: 3600`` and waits for
    nothing, never waiting 120 s three times to send three more doomed requests."""
    server = MockServer(_throttled(HOUR))
    notices: list[RetryNotice] = []
    error, spent, attempts = await _fails(api, server, RetryPolicy(), notices)
    assert isinstance(error, RateLimitError)
    assert error.retry_after == HOUR
    assert (attempts, len(server.calls), notices) == (1, 1, [])
    assert spent < 1.0


async def test_a_retry_after_of_max_retry_after_is_still_waited_for(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A wait equal to ``max_retry_after`` is honoured, as the SDK honours its two minutes."""
    server = MockServer(_throttled(30.0))
    notices: list[RetryNotice] = []
    policy = RetryPolicy(max_attempts=3, max_retry_after=30.0)
    error, spent, attempts = await _fails("chat", server, policy, notices)
    assert error.retry_after == 30.0
    assert (attempts, len(server.calls)) == (3, 3)
    assert [notice.delay for notice in notices] == [30.0, 30.0]
    assert spent == pytest.approx(60.0, abs=1.0)


async def test_a_spent_budget_resetting_past_max_retry_after_fails_the_request_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A 429 with no ``Retry-After`` whose headers report the request budget spent for
    six hours fails at once, its ``retry_after`` that reset; ``x-should-retry`` too."""
    headers = (*JSON, *SPENT_FOR_SIX_HOURS, ("x-should-retry", "true"))
    server = MockServer(ScriptedPolicy([RawReply(429, headers, BODY), MockReply(text="fine")]))
    notices: list[RetryNotice] = []
    error, spent, attempts = await _fails("chat", server, RetryPolicy(), notices)
    assert error.retry_after == pytest.approx(6 * HOUR)
    assert (attempts, len(server.calls), notices) == (1, 1, [])
    assert spent < 1.0


async def test_a_turn_refused_for_an_hour_ends_at_once_with_the_providers_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Through the runtime, the turn ends ``error`` with the 429's code within a second of
    virtual time, instead of after the policy's capped waits."""
    server = MockServer(_throttled(HOUR))
    adapter = mock_adapter("chat", server)
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with (
            adapter,
            retinue.open_runtime(models=adapter, retry=RetryPolicy()) as rt,
        ):
            agent = await rt.create_agent("a", retinue.AgentOptions(model="gpt"))
            start = trio.current_time()
            result = await agent.ask("hi")
            spent = trio.current_time() - start
    assert result.reason.kind == "error"
    assert result.reason.code == "rate_limit_exceeded"
    assert len(server.calls) == 1
    assert spent < 1.0


async def _times_of_two_requests(server: MockServer) -> tuple[list[float], list[str]]:
    """Two requests of two sessions through one lane: when each ended, and how (``ok``
    or the error's code)."""
    sent = await one_after_another(server, deadline=VIRTUAL_DEADLINE)
    return [one.ended for one in sent], [
        "ok" if one.error is None else str(one.error.code) for one in sent
    ]


async def test_a_lane_refused_for_an_hour_holds_the_next_request_no_longer_than_a_bare_429(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The next request of the lane goes out after the pause of a 429 that names no wait
    (1 s) and gets its own refusal at once, not after waiting ``max_retry_after`` (120 s)
    in admission, silently, to be refused all the same."""
    ended, outcomes = await _times_of_two_requests(MockServer(_throttled(HOUR)))
    assert outcomes == ["rate_limit_exceeded", "rate_limit_exceeded"]
    assert ended == pytest.approx([0.0, 1.0], abs=0.01)


async def test_a_429_reporting_a_budget_spent_for_hours_pauses_the_lane_as_a_bare_429(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Its headers' reset six hours off is not paused for either: the next request is
    served after 1 s, not 120 s."""
    refused = RawReply(429, (*JSON, *SPENT_FOR_SIX_HOURS), BODY)
    server = MockServer(ScriptedPolicy([refused, MockReply(text="fine")]))
    ended, outcomes = await _times_of_two_requests(server)
    assert outcomes == ["requests", "ok"]
    assert ended == pytest.approx([0.0, 1.0], abs=0.01)


async def test_a_success_reporting_a_budget_spent_for_hours_does_not_pause_the_lane(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A budget reset further off than ``max_retry_after`` holds no request back: the
    next one is sent at once (were the budget still spent, its refusal would fail it
    at once), not after 120 s."""
    spent = RawReply(200, (*SSE, *SPENT_FOR_SIX_HOURS), CHAT_STREAM)
    server = MockServer(ScriptedPolicy([spent, MockReply(text="fine")]))
    ended, outcomes = await _times_of_two_requests(server)
    assert outcomes == ["ok", "ok"]
    assert ended == pytest.approx([0.0, 0.0], abs=0.01)
