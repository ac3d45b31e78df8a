"""A spent quota (OpenAI's ``insufficient_quota``) is final: not retried, not a rate limit.

OpenAI answers it with HTTP 429, the status of a rate limit; only a billing
change mends it, so retrying it wastes the attempts and pausing the lane holds
up every session that shares it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ProviderError,
    ProviderStatusError,
    ProviderStreamError,
    RateLimitError,
    RetryNotice,
    RetryPolicy,
    manage,
)
from retinue.providers._failures import status_error
from retinue.providers.mock import MockReply, MockServer, RawReply, ScriptedPolicy

from .support import JSON, SSE, collect, make_request, mock_adapter, sse_body

VIRTUAL_DEADLINE = 600.0
MESSAGE = "You exceeded your current quota, please check your plan and billing details."
# The body OpenAI sends, as its API reference gives it.
OPENAI_QUOTA = {
    "error": {
        "message": MESSAGE,
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}


def _body(error: dict[str, Any]) -> bytes:
    return json.dumps({"error": error}).encode()


def _quota(*extra_headers: tuple[str, str]) -> RawReply:
    return RawReply(429, JSON + extra_headers, json.dumps(OPENAI_QUOTA).encode())


async def _failure(api: str, server: MockServer) -> ProviderError:
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter(api, server) as model:
            with pytest.raises(ProviderError) as caught:
                await collect(model, make_request("hi"))
    return caught.value


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize(
    "error",
    [
        OPENAI_QUOTA["error"],
        {"message": MESSAGE, "type": "insufficient_quota"},
        {"message": MESSAGE, "type": "invalid_request_error", "code": "insufficient_quota"},
    ],
    ids=["openai", "type-only", "code-only"],
)
async def test_a_spent_quota_is_a_final_status_error_not_a_rate_limit(
    api: str, error: dict[str, Any]
) -> None:
    """Every adapter turns a 429 naming ``insufficient_quota`` into a ``QUOTA_EXHAUSTED``
    status error that is not retryable and is no ``RateLimitError``.
    """
    server = MockServer(ScriptedPolicy([RawReply(429, JSON, _body(error))]))
    failure = await _failure(api, server)
    assert type(failure) is ProviderStatusError
    assert not isinstance(failure, RateLimitError)
    assert (failure.code, failure.status, failure.retryable) == ("QUOTA_EXHAUSTED", 429, False)
    assert MESSAGE in str(failure)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_spent_quota_in_a_list_shaped_body_is_still_final(api: str) -> None:
    """A compatible server that wraps its error body in a list (Gemini's) and names the
    quota spent gets the same final ``QUOTA_EXHAUSTED`` as a plain body."""
    body = json.dumps([OPENAI_QUOTA]).encode()
    failure = await _failure(api, MockServer(ScriptedPolicy([RawReply(429, JSON, body)])))
    assert not isinstance(failure, RateLimitError)
    assert (failure.code, failure.retryable) == ("QUOTA_EXHAUSTED", False)


async def test_an_ordinary_429_stays_a_retryable_rate_limit() -> None:
    """Only the quota's name makes a 429 final; a rate limit keeps its class and code."""
    body = _body({"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"})
    failure = await _failure("chat", MockServer(ScriptedPolicy([RawReply(429, JSON, body)])))
    assert isinstance(failure, RateLimitError)
    assert (failure.code, failure.retryable) == ("rate_limit_exceeded", True)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_manage_neither_retries_a_spent_quota_nor_pauses_the_lane(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """One request goes out; the admission lane records no throttling and no pause, even
    when the headers report the request budget spent too, and no retry is announced.
    """
    spent = (("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "30s"))
    server = MockServer(ScriptedPolicy([_quota(*spent)] * 4))
    admission = AdmissionController(AdmissionLimits(max_concurrent=4))
    notices: list[RetryNotice] = []
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter(api, server) as raw:
            model = manage(raw, retry=RetryPolicy(), admission=admission, on_retry=notices.append)
            with pytest.raises(ProviderStatusError) as caught:
                await collect(model, make_request("hi", model="m"))
    assert len(server.calls) == 1
    assert notices == []
    assert (model.statistics().attempts, model.statistics().retries) == (1, 0)
    lane = admission.statistics().lanes[0]
    assert (lane.throttled, lane.paused_for) == (0, 0.0)
    assert caught.value.code == "QUOTA_EXHAUSTED"


async def test_x_should_retry_true_still_wins_for_a_spent_quota(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The provider's ``x-should-retry: true`` makes any failure retryable, this one too;
    the retry is made, but the lane is still not treated as rate-limited.
    """
    server = MockServer(ScriptedPolicy([_quota(("x-should-retry", "true")), MockReply(text="ok")]))
    admission = AdmissionController(AdmissionLimits(max_concurrent=4))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter("chat", server) as raw:
            model = manage(raw, retry=RetryPolicy(), admission=admission)
            got = await collect(model, make_request("hi", model="m"))
    assert got.message.content[0].text == "ok"  # type: ignore[union-attr]
    assert len(server.calls) == 2
    assert admission.statistics().lanes[0].throttled == 0


@pytest.mark.parametrize(
    ("api", "body"),
    [
        # LiteLLM passes the status on as the event's code and the quota's name as its type.
        (
            "chat",
            sse_body(
                json.dumps(
                    {"error": {"message": MESSAGE, "type": "insufficient_quota", "code": "429"}}
                ).encode()
            ),
        ),
        (
            "responses",
            sse_body(
                json.dumps(
                    {"type": "error", "code": "insufficient_quota", "message": MESSAGE}
                ).encode()
            ),
        ),
    ],
)
async def test_a_spent_quota_inside_a_stream_is_final_too(
    api: str, body: bytes, autojump_clock: trio.abc.Clock
) -> None:
    """An in-stream error naming the quota is ``QUOTA_EXHAUSTED`` and not retryable, even
    when its code is the status 429; ``manage`` sends it once and does not pause the lane.
    """
    server = MockServer(ScriptedPolicy([RawReply(200, SSE, body)] * 4))
    admission = AdmissionController(AdmissionLimits(max_concurrent=4))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter(api, server) as raw:
            model = manage(raw, retry=RetryPolicy(), admission=admission)
            with pytest.raises(ProviderStreamError) as caught:
                await collect(model, make_request("hi", model="m"))
    assert len(server.calls) == 1
    assert admission.statistics().lanes[0].throttled == 0
    assert (caught.value.code, caught.value.retryable) == ("QUOTA_EXHAUSTED", False)


def test_the_retry_policy_itself_does_not_retry_a_spent_quota() -> None:
    """A policy asked directly (not only through ``manage``) refuses a spent quota's 429,
    and still retries an ordinary 429 and a quota error the provider marks retryable."""
    body = {
        "error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}
    }
    policy = RetryPolicy()
    assert not policy.is_retryable(status_error(429, body, {}, provider="openai"))
    assert policy.is_retryable(status_error(429, {"error": {}}, {}, provider="openai"))
    marked = status_error(429, body, {"x-should-retry": "true"}, provider="openai")
    assert policy.is_retryable(marked)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize(
    ("headers", "retried"),
    [(JSON, False), ((*JSON, ("x-should-retry", "true")), True)],
    ids=["unsaid", "should-retry"],
)
async def test_a_quota_code_passed_on_is_as_final_on_the_error_as_in_the_policy(
    api: str, status: int, headers: tuple[tuple[str, str], ...], retried: bool
) -> None:
    """A body that already carries the ``QUOTA_EXHAUSTED`` code (a gateway passing on what
    it was told) gets the verdict the retry policy gives: the error says it is retryable
    only when the provider said so, whatever its status.
    """
    body = _body({"message": MESSAGE, "code": "QUOTA_EXHAUSTED"})
    server = MockServer(ScriptedPolicy([RawReply(status, headers, body)]))
    failure = await _failure(api, server)
    assert (failure.code, failure.status) == ("QUOTA_EXHAUSTED", status)
    assert failure.retryable is retried
    assert RetryPolicy().is_retryable(failure) is retried
