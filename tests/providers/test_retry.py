"""Retries: the policy's delays and the ``manage`` wrapper, on the virtual clock."""

from __future__ import annotations

import logging
import math
import random
from typing import Any

import pytest
import trio

from retinue._stream import STOP, Finish, TextDelta, Usage, UsageChunk
from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    AuthenticationError,
    ModelRouter,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderStreamError,
    RateLimitError,
    RetryNotice,
    RetryPolicy,
    manage,
)
from retinue.providers._failures import status_error
from retinue.providers._feedback import report_response
from retinue.providers._ratelimits import retry_after_seconds

from .support import FakeModel, collect, make_request

OK = [TextDelta(0, "hi"), UsageChunk(Usage(10, 2)), Finish(STOP)]


def _rate_limited(after: float | None) -> RateLimitError:
    return RateLimitError(
        "slow down", code="rate_limit_exceeded", status=429, retry_after=after, retryable=True
    )


def test_retry_policy_delay_is_full_jitter_under_exponential_cap() -> None:
    """Without Retry-After the delay is uniform in [0, min(max_delay, base * 2**(n-1))]."""
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0)
    rng = random.Random(1)
    for attempt, cap in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (9, 3.0)):
        delays = [policy.delay(attempt, None, rng) for _ in range(200)]
        assert all(0.0 <= d <= cap for d in delays)
        assert max(delays) > cap * 0.8
        assert min(delays) < cap * 0.2


def test_retry_policy_honours_retry_after_up_to_its_cap() -> None:
    """Retry-After from the error is the delay, capped at max_retry_after."""
    policy = RetryPolicy(max_retry_after=30.0)
    assert policy.delay(1, _rate_limited(7.5)) == 7.5
    assert policy.delay(1, _rate_limited(3600)) == 30.0


def test_retry_after_headers_prefer_milliseconds() -> None:
    """retry-after-ms wins over retry-after; HTTP dates and junk are handled."""
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "4"}) == 4.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_retry_policy_retries_transient_statuses(status: int) -> None:
    """The transient statuses are retryable."""
    error = status_error(status, {"error": {"message": "x"}}, {}, provider="p")
    assert RetryPolicy().is_retryable(error)
    assert error.code == f"HTTP_{status}"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_retry_policy_does_not_retry_client_errors(status: int) -> None:
    """Client errors are final."""
    assert not RetryPolicy().is_retryable(status_error(status, b"", {}, provider="p"))


def test_retry_policy_respects_should_retry_header_and_connection_switch() -> None:
    """x-should-retry: false overrides the status; connection errors follow the switch."""
    refused = status_error(429, b"", {"x-should-retry": "false"}, provider="p")
    assert not RetryPolicy().is_retryable(refused)
    dropped = ProviderConnectionError("gone", code="CONNECTION_ERROR", retryable=True)
    assert RetryPolicy().is_retryable(dropped)
    assert not RetryPolicy(retry_connection_errors=False).is_retryable(dropped)
    assert not RetryPolicy().is_retryable(ValueError("not a provider error"))


async def test_manage_retries_after_retry_after_on_virtual_clock(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Each retry waits exactly the Retry-After; notices describe every retry."""
    with trio.fail_after(100):
        inner = FakeModel(
            [
                _rate_limited(5.0),
                OverloadedError(
                    "busy", code="overloaded_error", status=529, retry_after=2.0, retryable=True
                ),
                OK,
            ]
        )
        notices: list[RetryNotice] = []
        model = manage(inner, retry=RetryPolicy(max_attempts=5), on_retry=notices.append)
        start = trio.current_time()
        collected = await collect(model, make_request("hi", session_id="s-9", model="m"))
        assert [t - start for t in inner.started] == pytest.approx([0.0, 5.0, 7.0])
        assert collected.message.content[0].text == "hi"  # type: ignore[union-attr]
        assert [(n.attempt, n.delay, n.code, n.status) for n in notices] == [
            (1, 5.0, "rate_limit_exceeded", 429),
            (2, 2.0, "overloaded_error", 529),
        ]
        assert {(n.session_id, n.model, n.provider) for n in notices} == {("s-9", "m", "fake")}
        stats = model.statistics()
        assert (stats.requests, stats.attempts, stats.retries, stats.failures) == (1, 3, 2, 0)


async def test_manage_never_retries_after_first_chunk(autojump_clock: trio.abc.Clock) -> None:
    """A failure after a chunk was yielded propagates; there is no second attempt."""
    with trio.fail_after(100):
        cut = ProviderConnectionError("cut", code="STREAM_TRUNCATED", retryable=True)
        inner = FakeModel([[TextDelta(0, "par"), cut], OK])
        model = manage(inner, retry=RetryPolicy(max_attempts=5))
        with pytest.raises(ProviderConnectionError):
            await collect(model, make_request("hi"))
        assert len(inner.started) == 1
        assert model.statistics().failures == 1


async def test_manage_stops_after_max_attempts_with_the_last_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Bounded attempts: the last failure propagates with its code."""
    with trio.fail_after(100):
        inner = FakeModel([_rate_limited(1.0) for _ in range(3)])
        model = manage(inner, retry=RetryPolicy(max_attempts=3))
        with pytest.raises(RateLimitError) as caught:
            await collect(model, make_request("hi"))
        assert caught.value.code == "rate_limit_exceeded"
        assert len(inner.started) == 3
        assert model.statistics().retries == 2


async def test_manage_does_not_retry_final_errors(autojump_clock: trio.abc.Clock) -> None:
    """A 401 is raised at once, with no notice."""
    with trio.fail_after(100):
        inner = FakeModel([AuthenticationError("no", code="invalid_api_key", status=401), OK])
        notices: list[RetryNotice] = []
        model = manage(inner, retry=RetryPolicy(), on_retry=notices.append)
        with pytest.raises(AuthenticationError):
            await collect(model, make_request("hi"))
        assert notices == []
        assert len(inner.started) == 1


async def test_manage_contains_a_failing_retry_callback(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A raising on_retry is logged, and the retry still happens."""

    def explode(_notice: RetryNotice) -> None:
        raise RuntimeError("listener bug")

    with trio.fail_after(100), caplog.at_level(logging.ERROR, logger="retinue.providers"):
        inner = FakeModel([_rate_limited(0.5), OK])
        model = manage(inner, retry=RetryPolicy(), on_retry=explode)
        collected = await collect(model, make_request("hi"))
        assert collected.assembler.finish is STOP
        assert len(inner.started) == 2
    logged = [r for r in caplog.records if r.name == "retinue.providers" and r.exc_info]
    assert [(r.levelno, r.getMessage()) for r in logged] == [
        (logging.ERROR, "an on_retry callback failed")
    ]
    error = logged[0].exc_info[1]  # type: ignore[index]
    assert isinstance(error, RuntimeError)
    assert str(error) == "listener bug"


async def test_manage_reports_throttling_to_admission(autojump_clock: trio.abc.Clock) -> None:
    """A 429 pauses the lane for its Retry-After; the retry is admitted after the pause."""
    with trio.fail_after(100):
        admission = AdmissionController(AdmissionLimits(max_concurrent=4))
        inner = FakeModel([_rate_limited(3.0), OK])
        model = manage(inner, retry=RetryPolicy(), admission=admission)
        await collect(model, make_request("hi", model="m"))
        lane = admission.statistics().lanes[0]
        assert (lane.provider, lane.model) == ("fake", "m")
        assert lane.throttled == 1
        assert lane.admitted == 2
        assert lane.in_flight == 0
        assert inner.started[1] - inner.started[0] == pytest.approx(3.0)


async def test_manage_releases_admission_when_stream_is_abandoned(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Closing a managed stream early releases its admission slot."""
    with trio.fail_after(100):
        admission = AdmissionController(AdmissionLimits(max_concurrent=1))
        model = manage(FakeModel([OK, OK]), admission=admission)
        stream = model.stream(make_request("hi"))
        first = await stream.__anext__()
        assert isinstance(first, TextDelta)
        assert admission.statistics().in_flight == 1
        await stream.aclose()
        assert admission.statistics().in_flight == 0
        await collect(model, make_request("again"))


async def test_manage_charges_real_usage_to_token_budget(autojump_clock: trio.abc.Clock) -> None:
    """The up-front token estimate is replaced by the stream's real usage."""
    with trio.fail_after(100):
        admission = AdmissionController(AdmissionLimits(tokens_per_minute=10_000))
        model = manage(FakeModel([OK]), admission=admission)
        await collect(model, make_request("x" * 4000))
        assert admission.statistics().lanes[0].tokens_in_window == 12


def test_provider_error_is_a_model_error_with_code() -> None:
    """Typed provider errors carry code, status and retry data for the loop."""
    from retinue import ModelError

    error = _rate_limited(2.0)
    assert isinstance(error, ProviderError)
    assert isinstance(error, ModelError)
    assert (error.code, error.status, error.retry_after, error.retryable) == (
        "rate_limit_exceeded",
        429,
        2.0,
        True,
    )


async def test_manage_pauses_the_lane_for_no_wait_the_policy_does_not_honour(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A 429 asking for an hour fails its request at once and pauses the lane as a 429
    naming no wait does (1 s), not for ``max_retry_after`` nor the hour."""
    with trio.fail_after(1000):
        admission = AdmissionController()
        inner = FakeModel([_rate_limited(3600.0), OK])
        model = manage(inner, retry=RetryPolicy(max_retry_after=120.0), admission=admission)
        with pytest.raises(RateLimitError):
            await collect(model, make_request("hi"))
        await collect(model, make_request("again"))
        assert inner.started[1] - inner.started[0] == pytest.approx(1.0)


@pytest.mark.parametrize("value", ["nan", "-inf", "-1", "-0.5"])
def test_retry_after_that_is_no_wait_is_ignored(value: str) -> None:
    """A ``Retry-After`` that is NaN or negative asks for no wait: it counts as no header."""
    assert retry_after_seconds({"retry-after": value}) is None
    assert retry_after_seconds({"retry-after-ms": value}) is None
    assert retry_after_seconds({"retry-after-ms": value, "retry-after": "3"}) == 3.0


@pytest.mark.parametrize("value", ["inf", "Infinity", "1e400", "9" * 400])
def test_retry_after_too_large_for_a_float_is_an_infinite_wait(value: str) -> None:
    """``Retry-After: 1e400`` asks for a wait longer than ``1e9`` does, not for none: it is
    ``math.inf``, which the policy refuses to wait for and no lane pauses for."""
    assert retry_after_seconds({"retry-after": value}) == math.inf
    assert retry_after_seconds({"retry-after-ms": value}) == math.inf


def test_retry_policy_delay_stays_capped_after_many_attempts() -> None:
    """Backoff past attempt 1024 still waits at most ``max_delay`` (2.0 ** 1024 overflows)."""
    policy = RetryPolicy(max_attempts=5000, max_delay=30.0)
    assert 0.0 <= policy.delay(2000, rng=random.Random(1)) <= 30.0


def test_retry_policy_statuses_decide_unless_the_provider_said() -> None:
    """``retryable_statuses`` adds and removes statuses; ``x-should-retry`` overrides either way."""
    policy = RetryPolicy(retryable_statuses={425, 429})
    assert policy.is_retryable(status_error(425, b"", {}, provider="openai"))
    assert not policy.is_retryable(status_error(500, b"", {}, provider="openai"))
    said_no = status_error(425, b"", {"x-should-retry": "false"}, provider="openai")
    said_yes = status_error(400, b"", {"x-should-retry": "true"}, provider="openai")
    assert (policy.is_retryable(said_no), policy.is_retryable(said_yes)) == (False, True)


async def test_manage_applies_provider_limits_through_a_router(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A router's adapter is admitted in its own provider's lane (what ``open_runtime`` builds)."""
    adapter = FakeModel([OK] * 3, provider="openai", delay=1.0)
    admission = AdmissionController(
        per_model={("openai", "gpt"): AdmissionLimits(max_concurrent=1)}
    )
    model = manage(ModelRouter.of({"gpt": adapter}), admission=admission)
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            for index in range(3):
                request = make_request("hi", model="gpt", session_id=f"s{index}")
                nursery.start_soon(collect, model, request)
    assert adapter.started == [0.0, 1.0, 2.0]
    assert [(lane.provider, lane.model) for lane in admission.statistics().lanes] == [
        ("openai", "gpt")
    ]


@pytest.mark.parametrize("named", [None, "deepseek", "openai"])
async def test_a_routed_request_is_admitted_in_the_lane_of_the_adapter_serving_it(
    named: str | None, autojump_clock: trio.abc.Clock
) -> None:
    """R10.7: a request a route of the model name alone serves is charged to the provider of
    its adapter, whatever provider the request names: the one server's limits hold for every
    request it gets."""
    adapter = FakeModel([OK] * 3, provider="deepseek", delay=1.0)
    limits = {("deepseek", "deepseek-chat"): AdmissionLimits(max_concurrent=1)}
    admission = AdmissionController(per_model=limits)
    model = manage(ModelRouter.of({"deepseek-chat": adapter}), admission=admission)
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            for index in range(3):
                request = make_request(
                    "hi", model="deepseek-chat", provider=named, session_id=f"s{index}"
                )
                nursery.start_soon(collect, model, request)
    assert adapter.started == [0.0, 1.0, 2.0]
    assert [(lane.provider, lane.model) for lane in admission.statistics().lanes] == [
        ("deepseek", "deepseek-chat")
    ]


async def test_a_request_to_a_model_without_a_provider_keeps_the_provider_it_names(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A model that names no provider of its own leaves the lane to the request's."""
    adapter = FakeModel([OK], provider=None)  # type: ignore[arg-type]
    admission = AdmissionController()
    with trio.fail_after(100):
        await collect(manage(adapter, admission=admission), make_request("hi", provider="local"))
    assert [lane.provider for lane in admission.statistics().lanes] == ["local"]


async def test_manage_reports_an_overload_sent_inside_the_stream(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An ``overloaded_error`` event in a 200 stream throttles the lane like a 529 does."""
    overloaded = ProviderStreamError("Overloaded", code="overloaded_error", retryable=True)
    with trio.fail_after(100):
        admission = AdmissionController(AdmissionLimits(max_concurrent=8))
        inner = FakeModel([overloaded, OK])
        model = manage(inner, retry=RetryPolicy(), admission=admission)
        await collect(model, make_request("hi", model="m"))
    lane = admission.statistics().lanes[0]
    assert (lane.throttled, lane.admitted) == (1, 2)
    assert inner.started[1] - inner.started[0] == pytest.approx(1.0, abs=0.6)


def _exhausted_budget() -> list[object]:
    """A successful attempt whose headers say the request budget is spent for five hours."""
    report_response({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "5h"})
    return OK


async def test_manage_does_not_pause_the_lane_for_a_budget_spent_past_the_policys_wait(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Headers reporting a budget spent for hours, longer than ``max_retry_after``, do not
    pause the lane: one response would otherwise hold every agent back, only for the
    provider to refuse each, which fails it at once.
    """
    with trio.fail_after(100_000):
        admission = AdmissionController()
        inner = FakeModel([_exhausted_budget, OK])
        model = manage(inner, retry=RetryPolicy(max_retry_after=120.0), admission=admission)
        await collect(model, make_request("hi"))
        assert admission.statistics().lanes[0].paused_for == 0.0
        await collect(model, make_request("again"))
        assert inner.started[1] == pytest.approx(0.0)


@pytest.mark.parametrize("model", ["not a model", FakeModel], ids=["str", "model-class"])
def test_manage_refuses_what_is_no_model_adapter(model: object) -> None:
    """R10.7: ``manage`` refuses, when it wraps it, what is no model adapter, as a router
    refuses such a route, not taking it to fail each request with an ``AttributeError``
    or a missing-argument ``TypeError``."""
    with pytest.raises(TypeError, match=r"^manage needs a model adapter \(with stream\(\)\)"):
        manage(model)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"retry": 3}, "retry"),
        ({"retry": RetryPolicy}, "retry"),
        ({"admission": {"max_concurrent": 4}}, "admission"),
        ({"on_retry": "print"}, "on_retry"),
    ],
    ids=["retry-int", "retry-class", "admission-dict", "on-retry-text"],
)
def test_manage_refuses_options_of_another_kind(options: dict[str, Any], named: str) -> None:
    """``manage`` refuses a retry policy, admission controller or callback of another kind
    when it wraps the model, naming it, so no request fails with an ``AttributeError``
    and a callback that cannot be called is not only logged, retry after retry."""
    model = FakeModel([])
    with pytest.raises(TypeError, match=rf"^manage's {named} must be None or"):
        manage(model, **options)


@pytest.mark.parametrize("value", ["no", 0, None])
def test_retry_policy_refuses_a_connection_switch_that_is_no_bool(value: object) -> None:
    """``retry_connection_errors`` is a switch: anything but a bool is refused, so ``"no"``
    (true as a string) is not taken as yes, nor ``0`` or ``None`` as no, without a word."""
    with pytest.raises(TypeError, match=r"^RetryPolicy\.retry_connection_errors must be a bool"):
        RetryPolicy(retry_connection_errors=value)  # type: ignore[arg-type]


async def test_manage_checkpoints_for_a_stream_that_ends_at_once() -> None:
    """A managed stream is a checkpoint however its model's ends: one that ends with no
    chunk and no checkpoint of its own still sees a cancel, not ending with it unseen."""
    managed = manage(FakeModel([[]]), retry=RetryPolicy(max_attempts=1))
    with trio.CancelScope() as scope:
        scope.cancel()
        await collect(managed, make_request("hi"))
    assert scope.cancelled_caught
