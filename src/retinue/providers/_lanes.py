"""One admission lane per ``(provider, model)``: its limits, budgets, waiters and statistics."""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any, final

import attrs
import trio

from retinue._checks import finite_number_error, positive_int_error

from ._ratelimits import parse_rate_limits

__all__ = [
    "DEFAULT_PAUSE",
    "AdmissionLimits",
    "Charge",
    "Lane",
    "LaneKey",
    "LaneStatistics",
    "Waiter",
    "Window",
]

LaneKey = tuple[str | None, str]
DEFAULT_PAUSE = 1.0
"""How long a lane pauses for a 429, 503 or 529 that says no wait (before any cap)."""
GROWTH = 0.1
"""How fast a cut limit grows back (CUBIC's ``C``, per round of limit-many successes cubed)."""


def _positive_finite(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    # A zero limit admits nothing, ever: refused here rather than hanging every request.
    error = finite_number_error(value)
    if error is not None:
        expected = "a number" if error is TypeError else "positive and finite"
        raise error(f"AdmissionLimits.{attribute.name} must be {expected}, not {value!r}")


def _positive_count(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    error = None if value is None else positive_int_error(value)
    # The lane keeps its limit as a float, beside infinity for no limit: a count past a
    # float's range would fail every admission of its lane with an OverflowError.
    if error is None and value is not None and finite_number_error(value) is not None:
        error = ValueError
    if error is not None:
        expected = "an int" if error is TypeError else "positive and within a float's range"
        raise error(f"AdmissionLimits.{attribute.name} must be {expected}, not {value!r}")


@final
@attrs.frozen
class AdmissionLimits:
    """Limits for one ``(provider, model)``; ``None`` means unlimited (not for the window).

    Raises:
        TypeError: a concurrency limit is no int, a rate limit no number, or the
            window no number (``None`` included).
        ValueError: a limit or the window is not positive and finite, or a
            concurrency limit is past a float's range.
    """

    max_concurrent: int | None = attrs.field(default=None, validator=_positive_count)
    """Requests in flight at once."""
    requests_per_minute: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_positive_finite)
    )
    """Requests admitted in any ``window`` seconds."""
    tokens_per_minute: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_positive_finite)
    )
    """Tokens (estimated, then corrected by usage) admitted in any ``window`` seconds."""
    window: float = attrs.field(default=60.0, validator=_positive_finite)
    """The length of the sliding window, in seconds."""
    min_concurrent: int | None = attrs.field(default=None, kw_only=True, validator=_positive_count)
    """The least a 429, 503 or 529 cuts the concurrency limit to (``None``: 1). Equal to
    ``max_concurrent``, the limit never moves: against a provider that throttles at
    random, a fixed cap keeps its throughput where halving would not."""

    def __attrs_post_init__(self) -> None:
        low, high = self.min_concurrent, self.max_concurrent
        if low is not None and high is not None and low > high:
            raise ValueError(
                f"AdmissionLimits.min_concurrent ({low}) must not exceed max_concurrent ({high})"
            )


@final
@attrs.frozen
class LaneStatistics:
    """A snapshot of one ``(provider, model)`` lane."""

    provider: str | None
    model: str
    waiting: int
    """Requests waiting for admission now."""
    in_flight: int
    """Requests admitted and not yet finished."""
    throttled: int
    """Rate-limit and overload responses (429, 503, 529) observed so far."""
    admitted: int
    """Requests admitted so far."""
    concurrency_limit: float
    """The current (adaptive) concurrency limit; ``inf`` when unlimited."""
    requests_in_window: int
    """Requests admitted within the last window, less those given back (never sent).
    Counted only under a ``requests_per_minute`` limit: without one the lane keeps no
    window of requests, and this is 0."""
    tokens_in_window: int
    """Tokens charged within the last window (estimates, corrected by usage). Counted
    only under a ``tokens_per_minute`` limit: without one this is 0."""
    paused_for: float
    """Seconds until a pause (after a 429 or an exhausted budget) ends; 0 if none."""
    max_wait: float
    """The longest time any request waited for admission, in seconds, a wait given up
    (cancelled) included."""


@attrs.define(eq=False, slots=True)
class Charge:
    at: float
    amount: float
    in_window: bool = True
    """Whether its window's total still counts it: it has not aged out."""


@attrs.define(eq=False)
class Window:
    """A sliding-window budget: the sum of charges younger than ``span`` stays within ``limit``."""

    limit: float
    span: float
    charges: deque[Charge] = attrs.field(factory=deque)
    total: float = 0.0

    def prune(self, now: float) -> None:
        charges = self.charges
        while charges and charges[0].at + self.span <= now:
            charge = charges.popleft()
            self.total -= charge.amount
            charge.in_window = False

    def held(self, now: float) -> float:
        """The charges still within the window at *now*, pruning none of them.

        For a read from outside the lane's run: its time is an estimate, and
        pruning by it would age out charges the run still counts.
        """
        # A copy, taken at once: the run may append to the deque meanwhile.
        return sum(charge.amount for charge in tuple(self.charges) if charge.at + self.span > now)

    def wait(self, now: float, amount: float) -> float:
        """Seconds until *amount* fits (0 now); an oversized amount fits an empty window."""
        self.prune(now)
        if self.total + amount <= self.limit or not self.charges:
            return 0.0
        remaining = self.total
        for charge in self.charges:
            remaining -= charge.amount
            if remaining + amount <= self.limit or remaining <= 0:
                return charge.at + self.span - now
        return self.charges[-1].at + self.span - now

    def charge(self, now: float, amount: float) -> Charge:
        entry = Charge(now, amount)
        self.charges.append(entry)
        self.total += amount
        return entry

    def correct(self, entry: Charge, amount: float) -> None:
        # Marked when pruned, not searched for: a search from the newest charge cost a
        # stream's final usage one step per request admitted while it streamed.
        if entry.in_window:
            self.total += amount - entry.amount
        entry.amount = amount


@attrs.define(eq=False)
class Waiter:
    session: str | None
    tokens: int
    since: float
    wake: trio.Event = attrs.field(factory=trio.Event)
    granted: bool = False
    timed: bool = False
    request_charge: Charge | None = None
    token_charge: Charge | None = None


def _halved(limit: float) -> float:
    """What a cut leaves of *limit*: half, at least one."""
    return max(1.0, float(math.floor(limit / 2)))


@attrs.define(eq=False)
class Lane:
    key: LaneKey
    limits: AdmissionLimits
    requests: Window | None = None
    tokens: Window | None = None
    queues: OrderedDict[str | None, deque[Waiter]] = attrs.field(factory=OrderedDict)
    waiting: int = 0
    in_flight: int = 0
    concurrency: float = math.inf
    paused_until: float = -math.inf
    throttled: int = 0
    admitted: int = 0
    max_wait: float = 0.0
    _successes: int = 0
    _throttled_until: float = -math.inf
    _admitted_at_cut: float = -math.inf
    # The limit the last cut came from, and the rounds of limit-many successes since.
    _limit_at_cut: float = 0.0
    _rounds: int = 0

    def __attrs_post_init__(self) -> None:
        limits = self.limits
        if limits.max_concurrent is not None:
            self.concurrency = float(limits.max_concurrent)
        if limits.requests_per_minute is not None:
            self.requests = Window(limits.requests_per_minute, limits.window)
        if limits.tokens_per_minute is not None:
            self.tokens = Window(limits.tokens_per_minute, limits.window)

    def enqueue(self, waiter: Waiter) -> None:
        self.queues.setdefault(waiter.session, deque()).append(waiter)
        self.waiting += 1

    def remove(self, now: float, waiter: Waiter) -> None:
        """Take out a waiter that gave up; its wait counts towards ``max_wait`` all the same."""
        self.max_wait = max(self.max_wait, now - waiter.since)
        queue = self.queues.get(waiter.session)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            self.waiting -= 1
            if not queue:
                del self.queues[waiter.session]

    def head(self) -> Waiter | None:
        for queue in self.queues.values():
            return queue[0]
        return None

    def _blocked_for(self, now: float, waiter: Waiter) -> float:
        if self.paused_until > now:
            return self.paused_until - now
        if self.in_flight >= self.concurrency:
            return math.inf
        wait = 0.0
        if self.requests is not None:
            wait = self.requests.wait(now, 1.0)
        if self.tokens is not None:
            wait = max(wait, self.tokens.wait(now, float(waiter.tokens)))
        return wait

    def pump(self, now: float, caller: Waiter | None = None) -> float:
        """Admit waiters round-robin while budgets allow; the head's wait, or ``inf``.

        A head blocked only for a while (a pause, a window) is woken to arm its
        timer unless it is *caller* or already timed.
        """
        while self.queues:
            session, queue = next(iter(self.queues.items()))
            waiter = queue[0]
            wait = self._blocked_for(now, waiter)
            if wait > 0:
                if math.isfinite(wait) and waiter is not caller and not waiter.timed:
                    waiter.wake.set()
                return wait
            queue.popleft()
            if queue:
                self.queues.move_to_end(session)
            else:
                del self.queues[session]
            self.waiting -= 1
            self._grant(now, waiter)
        return math.inf

    def _grant(self, now: float, waiter: Waiter) -> None:
        waiter.granted = True
        if self.requests is not None:
            waiter.request_charge = self.requests.charge(now, 1.0)
        if self.tokens is not None:
            waiter.token_charge = self.tokens.charge(now, float(waiter.tokens))
        self.in_flight += 1
        self.admitted += 1
        self.max_wait = max(self.max_wait, now - waiter.since)
        waiter.wake.set()

    def release(self, now: float, *, success: bool) -> None:
        self.in_flight -= 1
        if success and self.concurrency < self._ceiling:
            self._successes += 1
            if self._successes >= self.concurrency:
                self._successes = 0
                self._rounds += 1
                self.concurrency = min(self._ceiling, self._grown())
        self.pump(now)

    def _grown(self) -> float:
        """The limit after one more round without a 429: CUBIC's window (RFC 9438).

        It grows back fast towards the limit of the last cut, slowly near it,
        then faster and faster past it: a provider whose throttling has ended
        gets its requests back within a few rounds, where one more a round
        would take minutes at the latencies of LLM calls. Never less than one more.
        """
        before = self._limit_at_cut
        plateau = (before / (2 * GROWTH)) ** (1 / 3)  # the rounds back to it from half
        cubic = GROWTH * (self._rounds - plateau) ** 3 + before
        return max(self.concurrency + 1, float(math.floor(cubic)))

    @property
    def _floor(self) -> float:
        """The least a cut leaves of the limit."""
        low = self.limits.min_concurrent
        return 1.0 if low is None else float(low)

    @property
    def _ceiling(self) -> float:
        limit = self.limits.max_concurrent
        return math.inf if limit is None else float(limit)

    def rate_limited(self, now: float, pause: float) -> None:
        self.throttled += 1
        # Requests sent before the first 429 of a burst tend to get one too, some
        # after its pause: one congestion event, for which the limit is halved once.
        # As TCP cuts its window once a round trip, it is cut again only once as
        # many requests as the cut left were admitted after it; else each late
        # 429 of a steady 5% would halve it again, holding it near 6.
        since_cut = self.admitted - self._admitted_at_cut
        window_of_cut = max(self._floor, _halved(self._limit_at_cut))
        same_event = self._throttled_until > now or since_cut < window_of_cut
        self._throttled_until = max(self._throttled_until, now + pause)
        self.paused_until = max(self.paused_until, now + pause)
        if same_event:
            return
        current = min(self.concurrency, max(1.0, float(self.in_flight)))
        self.concurrency = max(self._floor, _halved(current))
        self._successes = self._rounds = 0
        self._limit_at_cut = current
        self._admitted_at_cut = self.admitted

    def observe_headers(self, headers: Mapping[str, str], max_pause: float) -> None:
        info = parse_rate_limits(headers, time.time())
        if info.empty:
            return
        now = trio.current_time()
        for remaining, reset in (
            (info.requests_remaining, info.requests_reset),
            (info.tokens_remaining, info.tokens_reset),
        ):
            # A reset further off than max_pause is not waited for: see admit(). Nor is
            # an infinite one under no cap: it would close the lane for good.
            spent = remaining is not None and remaining <= 0
            if spent and reset and math.isfinite(reset) and reset <= max_pause:
                self.paused_until = max(self.paused_until, now + reset)

    def shift(self, seconds: float) -> None:
        """Move every time the lane keeps by *seconds* (onto another run's clock)."""
        for window in (self.requests, self.tokens):
            for charge in window.charges if window is not None else ():
                charge.at += seconds
        for queue in self.queues.values():
            for waiter in queue:
                waiter.since += seconds
        self.paused_until += seconds
        self._throttled_until += seconds

    def statistics(self, now: float, *, prune: bool = True) -> LaneStatistics:
        """The lane as of *now*; with *prune* false (a read from outside its run) it
        changes nothing."""
        requests = tokens = 0
        if self.requests is not None:
            requests = round(_in_window(self.requests, now, prune=prune))
        if self.tokens is not None:
            tokens = round(_in_window(self.tokens, now, prune=prune))
        return LaneStatistics(
            self.key[0],
            self.key[1],
            self.waiting,
            self.in_flight,
            self.throttled,
            self.admitted,
            self.concurrency,
            requests,
            tokens,
            max(0.0, self.paused_until - now),
            self.max_wait,
        )


def _in_window(window: Window, now: float, *, prune: bool) -> float:
    if not prune:
        return window.held(now)
    window.prune(now)
    return window.total
