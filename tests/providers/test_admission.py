"""Admission control: rate windows, concurrency, fairness and adaptation, on the virtual clock."""

from __future__ import annotations

import contextlib
import functools
import math
import re

import pytest
import trio

from retinue.providers import AdmissionController, AdmissionLimits
from retinue.providers._ratelimits import parse_duration, parse_rate_limits


async def _use(
    admission: AdmissionController,
    session: str,
    granted: list[tuple[float, str]],
    *,
    hold: float = 1.0,
    tokens: int = 0,
    model: str = "m",
) -> None:
    async with admission.admit(provider="p", model=model, session_id=session, tokens=tokens):
        granted.append((trio.current_time(), session))
        await trio.sleep(hold)


async def test_admission_never_exceeds_rpm_in_any_window_and_serves_everyone(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Under 60 RPM, 50 agents x 3 requests: at most 60 in any 60 s; max wait within 2x fair share."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=60))
    granted: list[tuple[float, str]] = []
    waits: dict[str, float] = {}

    async def agent(name: str) -> None:
        for _ in range(3):
            asked = trio.current_time()
            await _use(admission, name, granted)
            waits[name] = max(
                waits.get(name, 0.0), granted[-1][0] - asked if granted[-1][1] == name else 0.0
            )

    with trio.fail_after(1000):
        async with trio.open_nursery() as nursery:
            for index in range(50):
                nursery.start_soon(agent, f"agent-{index}")
    times = sorted(t for t, _ in granted)
    assert len(times) == 150
    for index, start in enumerate(times):
        in_window = sum(1 for t in times[index:] if t < start + 60.0)
        assert in_window <= 60
    counts = {name: sum(1 for _, n in granted if n == name) for name in waits}
    assert set(counts.values()) == {3}
    fair_share = 60.0 * 50 / 60  # seconds between one agent's requests at an equal share
    lane = admission.statistics().lanes[0]
    assert lane.max_wait <= 2 * fair_share
    assert lane.admitted == 150
    assert (lane.waiting, lane.in_flight) == (0, 0)


async def test_admission_round_robins_between_sessions(autojump_clock: trio.abc.Clock) -> None:
    """A session with many queued requests does not starve another session."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))
    granted: list[tuple[float, str]] = []
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(_use, admission, "busy", granted)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(_use, admission, "quiet", granted)
    order = [session for _, session in granted]
    assert order.index("quiet") <= 2


async def test_admission_caps_concurrency_and_reports_it(autojump_clock: trio.abc.Clock) -> None:
    """No more than max_concurrent requests are in flight; statistics show who waits."""
    admission = AdmissionController(per_model={"m": AdmissionLimits(max_concurrent=3)})
    peak = 0
    seen: list[tuple[int, int]] = []

    async def worker(name: str) -> None:
        nonlocal peak
        async with admission.admit(provider="p", model="m", session_id=name):
            stats = admission.statistics()
            peak = max(peak, stats.in_flight)
            seen.append((stats.in_flight, stats.waiting))
            await trio.sleep(1)

    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            for index in range(10):
                nursery.start_soon(worker, f"s{index}")
            await trio.testing.wait_all_tasks_blocked()
            stats = admission.statistics()
            assert (stats.in_flight, stats.waiting) == (3, 7)
            assert repr(admission) == "<AdmissionController lanes=1 waiting=7 in_flight=3>"
    assert peak == 3
    assert trio.current_time() == pytest.approx(4.0)


async def test_admission_corrects_token_estimate_with_real_usage(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An over-estimate corrected by usage frees budget for the next request at once."""
    admission = AdmissionController(AdmissionLimits(tokens_per_minute=1000))
    with trio.fail_after(200):
        async with admission.admit(provider="p", model="m", tokens=800) as ticket:
            ticket.record_usage(100)
        async with admission.admit(provider="p", model="m", tokens=800):
            assert trio.current_time() == 0.0
        async with admission.admit(provider="p", model="m", tokens=800):
            assert trio.current_time() == pytest.approx(60.0)
        assert admission.statistics().lanes[0].tokens_in_window == 800


async def test_admission_usage_below_the_estimate_admits_a_waiter_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Usage recorded while a request is still running frees its surplus budget right then."""
    admission = AdmissionController(AdmissionLimits(tokens_per_minute=1000))
    admitted: list[float] = []

    async def first() -> None:
        async with admission.admit(provider="p", model="m", tokens=800) as ticket:
            await trio.sleep(1)
            ticket.record_usage(100)
            await trio.sleep(9)

    async def second() -> None:
        await trio.sleep(0.5)
        async with admission.admit(provider="p", model="m", tokens=800):
            admitted.append(trio.current_time())

    with trio.fail_after(200):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            nursery.start_soon(second)
    assert admitted == [pytest.approx(1.0)]


async def test_admission_admits_an_oversized_request_into_an_empty_window(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A request larger than the whole budget still runs once the window is empty."""
    admission = AdmissionController(AdmissionLimits(tokens_per_minute=100))
    with trio.fail_after(200):
        async with admission.admit(provider="p", model="m", tokens=500):
            pass
        async with admission.admit(provider="p", model="m", tokens=10):
            assert trio.current_time() == pytest.approx(60.0)


async def _throttled_call(admission: AdmissionController) -> None:
    """One admitted call that the provider rate-limits (it ends in failure)."""
    try:
        async with admission.admit(provider="p", model="m"):
            admission.rate_limited("p", "m", 10.0)
            raise RuntimeError("the call was rate-limited")
    except RuntimeError:
        pass


async def test_admission_pauses_after_429_and_halves_concurrency(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A 429 pauses the lane for Retry-After and halves its limit, which then grows back."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=8))
    with trio.fail_after(200):
        await _throttled_call(admission)
        lane = admission.statistics().lanes[0]
        assert (lane.throttled, lane.concurrency_limit, lane.paused_for) == (1, 1.0, 10.0)
        async with admission.admit(provider="p", model="m"):
            assert trio.current_time() == pytest.approx(10.0)
        for _ in range(20):
            async with admission.admit(provider="p", model="m"):
                pass
        assert admission.statistics().lanes[0].concurrency_limit > 4


async def test_admission_pauses_when_headers_report_exhausted_budget(
    autojump_clock: trio.abc.Clock,
) -> None:
    """remaining-requests 0 with a reset pauses the lane until the reset."""
    admission = AdmissionController()
    with trio.fail_after(200):
        async with admission.admit(provider="p", model="m") as ticket:
            ticket.observe_headers(
                {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2.5s"}
            )
        async with admission.admit(provider="p", model="m"):
            assert trio.current_time() == pytest.approx(2.5)


async def test_admission_ticket_pauses_for_no_wait_longer_than_its_max_pause(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A 429's Retry-After and an exhausted budget's reset up to the ``max_pause`` given
    at admission pause the lane; a longer one, which its caller does not wait for
    either, pauses it as a 429 naming no wait does (1 s), and a budget's not at all."""
    admission = AdmissionController()
    with trio.fail_after(200):
        async with admission.admit(provider="p", model="m", max_pause=3.0) as ticket:
            ticket.rate_limited(3.0)
            assert admission.statistics().lanes[0].paused_for == pytest.approx(3.0)
        async with admission.admit(provider="p", model="m", max_pause=3.0) as ticket:
            assert trio.current_time() == pytest.approx(3.0)
            ticket.rate_limited(3600.0)
            assert admission.statistics().lanes[0].paused_for == pytest.approx(1.0)
        async with admission.admit(provider="p", model="m", max_pause=5.0) as ticket:
            assert trio.current_time() == pytest.approx(4.0)
            ticket.observe_headers(
                {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1h"}
            )
            assert admission.statistics().lanes[0].paused_for == 0.0
            ticket.observe_headers(
                {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "5s"}
            )
        async with admission.admit(provider="p", model="m"):
            assert trio.current_time() == pytest.approx(9.0)
    assert admission.statistics().lanes[0].throttled == 2


@pytest.mark.parametrize(
    ("max_pause", "error"),
    [
        (-1.0, ValueError),
        (math.nan, ValueError),
        (-math.inf, ValueError),
        (10**400, ValueError),
        (True, TypeError),
        ("1", TypeError),
    ],
)
async def test_admission_refuses_a_max_pause_that_is_no_cap(
    max_pause: float, error: type[Exception]
) -> None:
    """A negative cap is no duration (``RetryPolicy`` refuses one too), NaN would cap
    nothing and ``True`` is no number of seconds: refused at admission."""
    admission = AdmissionController()
    with pytest.raises(error, match="max_pause"):
        async with admission.admit(provider="p", model="m", max_pause=max_pause):
            pass


async def test_admission_takes_an_infinite_max_pause_as_no_cap(
    autojump_clock: trio.abc.Clock,
) -> None:
    """``math.inf`` (the default) leaves a Retry-After as it came."""
    admission = AdmissionController()
    async with admission.admit(provider="p", model="m", max_pause=math.inf) as ticket:
        ticket.rate_limited(90.0)
        assert admission.statistics().lanes[0].paused_for == pytest.approx(90.0)


@pytest.mark.parametrize(("retry_after", "error"), [(True, TypeError), (math.nan, ValueError)])
async def test_a_ticket_checks_a_retry_after_before_capping_it(
    autojump_clock: trio.abc.Clock, retry_after: float, error: type[Exception]
) -> None:
    """What the ticket's cap would hide (a bool under a cap above 1 s, NaN) is refused as
    the controller refuses it, naming ``retry_after``."""
    admission = AdmissionController()
    async with admission.admit(provider="p", model="m", max_pause=0.5) as ticket:
        with pytest.raises(error, match="retry_after"):
            ticket.rate_limited(retry_after)


async def test_admission_cancelled_waiter_leaves_no_trace(autojump_clock: trio.abc.Clock) -> None:
    """A waiter cancelled in the queue is removed; the next waiter is admitted normally."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))
    granted: list[tuple[float, str]] = []
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(_use, admission, "a", granted, hold=5.0))
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(1.0):
                await _use(admission, "b", granted)
            assert admission.statistics().waiting == 0
            nursery.start_soon(_use, admission, "c", granted)
    assert [s for _, s in granted] == ["a", "c"]
    assert granted[1][0] == pytest.approx(5.0)
    lane = admission.statistics().lanes[0]
    assert (lane.waiting, lane.in_flight, lane.admitted) == (0, 0, 2)


async def test_admission_lanes_are_independent(autojump_clock: trio.abc.Clock) -> None:
    """Limits apply per (provider, model): a full lane does not block another model."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))
    with trio.fail_after(100):
        async with (
            admission.admit(provider="p", model="a"),
            admission.admit(provider="p", model="b"),
        ):
            assert trio.current_time() == 0.0
    assert len(admission.statistics().lanes) == 2


def test_rate_limit_headers_parse_for_both_providers() -> None:
    """OpenAI durations and Anthropic timestamps both become seconds from now."""
    assert parse_duration("6m0s") == 360.0
    assert parse_duration("12ms") == pytest.approx(0.012)
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration("soon") is None
    openai = parse_rate_limits(
        {
            "x-ratelimit-remaining-requests": "4999",
            "x-ratelimit-reset-requests": "12ms",
            "x-ratelimit-remaining-tokens": "0",
            "x-ratelimit-reset-tokens": "1s",
        },
        0.0,
    )
    assert (openai.requests_remaining, openai.tokens_remaining, openai.tokens_reset) == (
        4999,
        0,
        1.0,
    )
    anthropic = parse_rate_limits(
        {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "1970-01-01T00:01:40Z",
        },
        40.0,
    )
    assert (anthropic.requests_remaining, anthropic.requests_reset) == (0, 60.0)
    assert parse_rate_limits({}, 0.0).empty
    assert math.isfinite(anthropic.requests_reset or math.inf)


@pytest.mark.parametrize(
    "limits",
    [
        {"max_concurrent": 0},
        {"requests_per_minute": 0},
        {"tokens_per_minute": -5},
        {"window": math.inf},
        {"requests_per_minute": math.nan},
    ],
)
def test_admission_limits_refuse_limits_that_admit_nothing(limits: dict[str, float]) -> None:
    """A zero limit would hang every request of its lane: it is refused where it is built."""
    with pytest.raises(ValueError, match=next(iter(limits))):
        AdmissionLimits(**limits)  # type: ignore[arg-type]


@pytest.mark.parametrize("count", [2.5, True, "3"])
def test_admission_limits_take_only_an_int_as_a_concurrency_limit(count: object) -> None:
    """Requests in flight are counted whole: 2.5 or ``True`` is refused, naming the field."""
    with pytest.raises(TypeError, match="max_concurrent"):
        AdmissionLimits(max_concurrent=count)  # type: ignore[arg-type]


async def _cut_from(admission: AdmissionController, in_flight: int) -> None:
    """*in_flight* calls at once, each answered by a 429: one cut, from *in_flight*."""
    release = trio.Event()

    async def held() -> None:
        # Leaving with an error, as a managed attempt that got its 429 does.
        with contextlib.suppress(RuntimeError):
            async with admission.admit(provider="p", model="m"):
                await release.wait()
                admission.rate_limited("p", "m", 0.1)
                raise RuntimeError("429")

    async with trio.open_nursery() as nursery:
        for _ in range(in_flight):
            nursery.start_soon(held)
        await trio.sleep(1)
        assert admission.statistics().in_flight == in_flight
        release.set()
    await trio.sleep(1)  # past the pause


async def test_admission_burst_of_429s_halves_the_limit_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Every in-flight request of a burst gets its 429: one congestion event, one halving."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=64))
    with trio.fail_after(100):
        await _cut_from(admission, 64)
    lane = admission.statistics().lanes[0]
    assert (lane.throttled, lane.concurrency_limit) == (64, 32.0)


async def test_admission_late_429s_of_requests_sent_before_a_cut_do_not_cut_it_again(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The 429s of requests admitted before a cut, arriving after its pause, are the same
    congestion event: the limit is cut once, and again only after limit-many requests
    were admitted since, not halved again by each such 429 (64 to 4 in four 429s)."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=64))
    answers = [trio.Event() for _ in range(64)]

    async def held(answer: trio.Event) -> None:
        with contextlib.suppress(RuntimeError):
            async with admission.admit(provider="p", model="m"):
                await answer.wait()
                admission.rate_limited("p", "m", 0.1)
                raise RuntimeError("429")

    limits: list[float] = []
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            for answer in answers:
                nursery.start_soon(held, answer)
            await trio.sleep(1)
            for answer in answers[:4]:
                answer.set()
                await trio.sleep(1)  # each 429 lands after the last one's pause
                limits.append(admission.statistics().lanes[0].concurrency_limit)
            for answer in answers[4:]:
                answer.set()
        for _ in range(32):  # a window of admissions after the cut
            async with admission.admit(provider="p", model="m"):
                pass
        limit = admission.statistics().lanes[0].concurrency_limit
        with contextlib.suppress(RuntimeError):
            async with admission.admit(provider="p", model="m"):
                admission.rate_limited("p", "m", 0.1)
                raise RuntimeError("429")
    assert limits == [32.0, 32.0, 32.0, 32.0]
    assert limit > 32.0
    assert admission.statistics().lanes[0].concurrency_limit == 1.0  # one in flight, halved


@pytest.mark.parametrize("retry_after", [-1.0, math.inf, math.nan])
def test_admission_refuses_a_pause_that_is_not_a_duration(retry_after: float) -> None:
    """An infinite pause would close the lane for good: it is refused, not obeyed."""
    admission = AdmissionController()
    with pytest.raises(ValueError, match="retry_after"):
        admission.rate_limited("p", "m", retry_after)


def test_rate_limit_headers_that_are_not_finite_numbers_are_read_without_a_crash() -> None:
    """A count of ``inf`` (a broken proxy) is no information, and so is a reset of ``nan``;
    a reset of ``inf`` or ``1e400`` is one further off than any wait, as ``1e9`` is."""
    headers = {
        "x-ratelimit-remaining-requests": "inf",
        "x-ratelimit-reset-requests": "inf",
        "x-ratelimit-remaining-tokens": "1e400",
        "x-ratelimit-reset-tokens": "nan",
    }
    info = parse_rate_limits(headers, 0.0)
    assert (info.requests_remaining, info.requests_reset) == (None, math.inf)
    assert (info.tokens_remaining, info.tokens_reset) == (None, None)
    assert parse_duration("inf") == parse_duration("1e400") == math.inf


async def test_a_budget_reset_too_large_for_a_float_pauses_no_lane(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A spent budget whose reset is infinite does not close the lane for good, even for a
    ticket with no ``max_pause``: the next request is admitted at once."""
    admission = AdmissionController()
    with trio.fail_after(200):
        async with admission.admit(provider="p", model="m") as ticket:
            ticket.observe_headers(
                {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1e400"}
            )
        assert admission.statistics().lanes[0].paused_for == 0.0
        async with admission.admit(provider="p", model="m"):
            assert trio.current_time() == 0.0


@pytest.mark.parametrize("reset", ["0001-01-01", "0001-01-01T00:00:00+14:00", "9999-12-31"])
def test_rate_limit_reset_that_is_not_a_usable_time_is_ignored(reset: str) -> None:
    """A reset date that cannot be a Unix time (a broken proxy) is no information, not a crash."""
    for headers in (
        {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": reset},
        {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset,
        },
    ):
        info = parse_rate_limits(headers, 0.0)
        assert info.requests_remaining == 0
        assert info.requests_reset is None or math.isfinite(info.requests_reset)


def test_admission_repr_needs_no_trio_run() -> None:
    """A repr is asked for anywhere: outside trio it is given too, no RuntimeError raised."""
    assert repr(AdmissionController()) == "<AdmissionController lanes=0 waiting=0 in_flight=0>"


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"limits": 5}, TypeError, "limits"),
        ({"limits": {"max_concurrent": 4}}, TypeError, "limits"),
        ({"per_model": [("m", AdmissionLimits())]}, TypeError, "per_model"),
        ({"per_model": {"m": 5}}, TypeError, "per_model['m']"),
        ({"per_model": {5: AdmissionLimits()}}, TypeError, "per_model"),
        ({"per_model": {("openai",): AdmissionLimits()}}, TypeError, "per_model"),
        ({"per_model": {"": AdmissionLimits()}}, TypeError, "per_model"),
    ],
    ids=["limits-int", "limits-dict", "list", "value", "key-int", "key-short", "key-empty"],
)
def test_admission_controller_refuses_limits_of_another_kind(
    options: dict[str, object], error: type[Exception], named: str
) -> None:
    """Limits that are no ``AdmissionLimits``, or keyed by neither a model name nor a
    ``(provider, model)`` pair, are refused when built, naming them, not kept to fail the
    first admission with an ``AttributeError`` or to match no lane."""
    with pytest.raises(error, match=rf"^AdmissionController {re.escape(named)}"):
        AdmissionController(**options)  # type: ignore[call-overload]


async def _429_after(admission: AdmissionController, successes: int) -> None:
    """*successes* calls, one after another, then one answered by a 429."""
    for _ in range(successes):
        async with admission.admit(provider="p", model="m"):
            pass
    with contextlib.suppress(RuntimeError):
        async with admission.admit(provider="p", model="m"):
            admission.rate_limited("p", "m", 0.1)
            raise RuntimeError("429")


async def _round_of_successes(admission: AdmissionController) -> float:
    """As many successful calls as the lane's limit, one after another; the limit after."""
    for _ in range(int(admission.statistics().lanes[0].concurrency_limit)):
        async with admission.admit(provider="p", model="m"):
            await trio.sleep(0.1)
    return admission.statistics().lanes[0].concurrency_limit


async def test_a_cut_limit_grows_back_within_a_few_rounds_then_faster_past_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    """After a cut from 64 to 32, rounds of limit-many successes take the limit back to 64
    in six rounds, then by one a round near it, then faster and faster past it (CUBIC,
    RFC 9438); a second cut starts the rounds again. Growing by one a round would take 32
    rounds back to 64, which at the seconds an LLM call takes keeps a lane throttled for
    minutes after the provider's throttling ends."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1000))
    with trio.fail_after(10_000):
        await _cut_from(admission, 64)
        assert admission.statistics().lanes[0].concurrency_limit == 32.0
        limits = [await _round_of_successes(admission) for _ in range(16)]
        await _cut_from(admission, 64)
        again = [await _round_of_successes(admission) for _ in range(3)]
    assert limits[:10] == [44.0, 52.0, 58.0, 61.0, 63.0, 64.0, 65.0, 66.0, 67.0, 68.0]
    assert limits[15] > 128.0
    assert again == [44.0, 52.0, 58.0]


async def test_a_429_before_the_cut_s_window_of_admissions_does_not_cut_again(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A cut to 32 is not cut again by a 429 of one of the next 31 requests: it is the
    same congestion event, answered once (as TCP cuts its window once a round trip)."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1000))
    with trio.fail_after(10_000):
        await _cut_from(admission, 64)
        await _429_after(admission, 30)
    assert admission.statistics().lanes[0].concurrency_limit == 32.0


async def test_a_cut_stops_at_min_concurrent(autojump_clock: trio.abc.Clock) -> None:
    """A burst of 429s from 64 in flight cuts the limit to the floor the lane was given,
    not below it; a second burst after a window of admissions leaves it there."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=64, min_concurrent=40))
    with trio.fail_after(100):
        await _cut_from(admission, 64)
        assert admission.statistics().lanes[0].concurrency_limit == 40.0
        for _ in range(40):
            async with admission.admit(provider="p", model="m"):
                pass
        await _cut_from(admission, 40)
    assert admission.statistics().lanes[0].concurrency_limit == 40.0


async def test_min_concurrent_equal_to_max_concurrent_fixes_the_limit(
    autojump_clock: trio.abc.Clock,
) -> None:
    """With the floor at the cap, 429s still pause the lane but never move its limit: a
    fixed cap against a provider that throttles at random."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=16, min_concurrent=16))
    with trio.fail_after(100):
        await _cut_from(admission, 16)
        lane = admission.statistics().lanes[0]
        await _round_of_successes(admission)
    assert (lane.throttled, lane.concurrency_limit) == (16, 16.0)
    assert admission.statistics().lanes[0].concurrency_limit == 16.0


@pytest.mark.parametrize(
    ("limits", "error", "message"),
    [
        ({"min_concurrent": 0}, ValueError, "min_concurrent must be positive"),
        ({"min_concurrent": True}, TypeError, "min_concurrent must be an int"),
        (
            {"max_concurrent": 4, "min_concurrent": 5},
            ValueError,
            r"min_concurrent \(5\) must not exceed max_concurrent \(4\)",
        ),
    ],
)
def test_admission_limits_refuse_a_floor_that_is_no_count_or_above_the_cap(
    limits: dict[str, object], error: type[Exception], message: str
) -> None:
    """The floor is a positive int no greater than the cap, refused where it is built."""
    with pytest.raises(error, match=message):
        AdmissionLimits(**limits)  # type: ignore[arg-type]


async def test_a_cut_to_the_floor_counts_its_window_from_the_floor(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A cut from 64 that the floor holds at 40 lasts 40 admissions, not the 32 half of
    64 would: a 429 after 35 is the same congestion event, and the limit still grows back
    towards 64. Counted from 32, it would cut again, from the few then in flight, and the
    limit would crawl back by one a round."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=64, min_concurrent=40))
    with trio.fail_after(10_000):
        await _cut_from(admission, 64)
        await _429_after(admission, 34)
        await trio.sleep(1)  # past the pause
        limits = [await _round_of_successes(admission) for _ in range(3)]
    assert limits == [44.0, 52.0, 58.0]


async def test_a_lane_counts_in_its_window_only_what_it_has_a_limit_for(
    autojump_clock: trio.abc.Clock,
) -> None:
    """``requests_in_window`` and ``tokens_in_window`` count under their limits only: a lane
    with neither reads 0 for both, as its statistics document, and ``admitted`` counts."""
    admission = AdmissionController(
        per_model={"limited": AdmissionLimits(requests_per_minute=100, tokens_per_minute=10**6)}
    )
    with trio.fail_after(10):
        for model in ("limited", "free", "free"):
            async with admission.admit(provider="p", model=model, tokens=50):
                pass
    lanes = {lane.model: lane for lane in admission.statistics().lanes}
    limited, free = lanes["limited"], lanes["free"]
    assert (limited.requests_in_window, limited.tokens_in_window) == (1, 50)
    assert (free.requests_in_window, free.tokens_in_window, free.admitted) == (0, 0, 2)
