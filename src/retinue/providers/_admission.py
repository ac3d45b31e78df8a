"""Admission control shared by every agent of a runtime: concurrency and rate budgets.

Each ``(provider, model)`` has a lane: a concurrency limit and two sliding
60-second budgets, one of requests and one of tokens. A token bucket of
capacity N lets 2N through in some 60 s window (a full bucket plus a
minute's refill), so the budgets are sliding windows instead: what was
admitted in the last 60 s, never more than the limit. Estimated input tokens
are charged up front and corrected with the real usage. Waiters are served
round-robin by session (FIFO within a session), so no agent starves. A 429
pauses the lane for its ``Retry-After`` and halves the concurrency limit (once
per burst of 429s), which then grows back by one per limit-many successes; rate-limit headers that
report an exhausted budget pause the lane until the reset. Both pauses are
capped by the ``max_pause`` a request was admitted with, held on its ticket
(``manage`` passes its retry policy's ``max_retry_after``).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, final

import attrs
import trio

from ._ratelimits import parse_rate_limits

__all__ = [
    "AdmissionController",
    "AdmissionLimits",
    "AdmissionStatistics",
    "AdmissionTicket",
    "LaneStatistics",
]

LaneKey = tuple[str | None, str]


def _positive_finite(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    # A zero limit admits nothing, ever: refused here rather than hanging every request.
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"AdmissionLimits.{attribute.name} must be a number, not {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"AdmissionLimits.{attribute.name} must be positive and finite, not {value!r}"
        )


@final
@attrs.frozen
class AdmissionLimits:
    """Limits for one ``(provider, model)``; ``None`` means unlimited.

    Raises:
        ValueError: a limit or the window is not positive and finite.
    """

    max_concurrent: int | None = attrs.field(default=None, validator=_positive_finite)
    """Requests in flight at once."""
    requests_per_minute: float | None = attrs.field(default=None, validator=_positive_finite)
    """Requests admitted in any ``window`` seconds."""
    tokens_per_minute: float | None = attrs.field(default=None, validator=_positive_finite)
    """Tokens (estimated, then corrected by usage) admitted in any ``window`` seconds."""
    window: float = attrs.field(default=60.0, validator=_positive_finite)
    """The length of the sliding window, in seconds."""


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
    """Rate-limit responses (429/529) observed so far."""
    admitted: int
    """Requests admitted so far."""
    concurrency_limit: float
    """The current (adaptive) concurrency limit; ``inf`` when unlimited."""
    requests_in_window: int
    """Requests admitted within the last window."""
    tokens_in_window: int
    """Tokens charged within the last window."""
    paused_for: float
    """Seconds until a pause (after a 429 or an exhausted budget) ends; 0 if none."""
    max_wait: float
    """The longest time any request waited for admission, in seconds."""


@final
@attrs.frozen
class AdmissionStatistics:
    """A snapshot of every lane."""

    lanes: tuple[LaneStatistics, ...]

    @property
    def waiting(self) -> int:
        """Requests waiting, over all lanes."""
        return sum(lane.waiting for lane in self.lanes)

    @property
    def in_flight(self) -> int:
        """Requests in flight, over all lanes."""
        return sum(lane.in_flight for lane in self.lanes)

    @property
    def throttled(self) -> int:
        """Rate-limit responses observed, over all lanes."""
        return sum(lane.throttled for lane in self.lanes)


@attrs.define(eq=False, slots=True)
class _Charge:
    at: float
    amount: float


@attrs.define(eq=False)
class _Window:
    """A sliding-window budget: the sum of charges younger than ``span`` stays within ``limit``."""

    limit: float
    span: float
    charges: deque[_Charge] = attrs.field(factory=deque)
    total: float = 0.0

    def prune(self, now: float) -> None:
        charges = self.charges
        while charges and charges[0].at + self.span <= now:
            self.total -= charges.popleft().amount

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

    def charge(self, now: float, amount: float) -> _Charge:
        entry = _Charge(now, amount)
        self.charges.append(entry)
        self.total += amount
        return entry

    def correct(self, entry: _Charge, amount: float) -> None:
        if any(charge is entry for charge in reversed(self.charges)):
            self.total += amount - entry.amount
        entry.amount = amount


@attrs.define(eq=False)
class _Waiter:
    session: str | None
    tokens: int
    since: float
    wake: trio.Event = attrs.field(factory=trio.Event)
    granted: bool = False
    timed: bool = False
    request_charge: _Charge | None = None
    token_charge: _Charge | None = None


def _granted(waiter: _Waiter) -> bool:
    return waiter.granted


@final
@attrs.define(eq=False)
class AdmissionTicket:
    """One admitted request: report its usage and the provider's rate-limit signals.

    Every pause this ticket causes lasts at most the ``max_pause`` it was
    admitted with.
    """

    _lane: _Lane
    _request_charge: _Charge | None
    _token_charge: _Charge | None
    released: bool = False
    _max_pause: float = math.inf

    def record_usage(self, tokens: int) -> None:
        """Correct the up-front token estimate with the real count; never blocks.

        Budget freed by an over-estimate admits waiting requests at once.
        """
        if self._token_charge is not None and self._lane.tokens is not None:
            self._lane.tokens.correct(self._token_charge, float(tokens))
            self._lane.pump(trio.current_time())

    def observe_headers(self, headers: Mapping[str, str], *, max_pause: float = math.inf) -> None:
        """Adapt the lane to a response's rate-limit headers; never blocks.

        A budget reported exhausted pauses the lane until its reset, for at most
        the ticket's ``max_pause`` (or *max_pause*, if smaller).
        """
        self._lane.observe_headers(headers, min(max_pause, self._max_pause))

    def rate_limited(self, retry_after: float | None) -> None:
        """Report the request's 429/529 to its lane; never blocks.

        As :meth:`AdmissionController.rate_limited`, with *retry_after* capped
        at the ticket's ``max_pause``.

        Raises:
            ValueError: *retry_after* is negative or not a number.
        """
        if retry_after is not None:
            retry_after = min(retry_after, self._max_pause)
        pause = _checked_pause(retry_after)
        self._lane.rate_limited(trio.current_time(), pause)

    def refund(self) -> None:
        """Give back the request's charges (it never reached the provider)."""
        if self._request_charge is not None and self._lane.requests is not None:
            self._lane.requests.correct(self._request_charge, 0.0)
        self.record_usage(0)


def _checked_pause(retry_after: float | None) -> float | None:
    # An infinite pause would close the lane for good: it is refused, not obeyed.
    if retry_after is not None and not (math.isfinite(retry_after) and retry_after >= 0):
        raise ValueError(f"retry_after must be a finite number of seconds, not {retry_after!r}")
    return retry_after


@attrs.define(eq=False)
class _Lane:
    key: LaneKey
    limits: AdmissionLimits
    requests: _Window | None = None
    tokens: _Window | None = None
    queues: OrderedDict[str | None, deque[_Waiter]] = attrs.field(factory=OrderedDict)
    waiting: int = 0
    in_flight: int = 0
    concurrency: float = math.inf
    paused_until: float = -math.inf
    throttled: int = 0
    admitted: int = 0
    max_wait: float = 0.0
    _successes: int = 0
    _throttled_until: float = -math.inf

    def __attrs_post_init__(self) -> None:
        limits = self.limits
        if limits.max_concurrent is not None:
            self.concurrency = float(limits.max_concurrent)
        if limits.requests_per_minute is not None:
            self.requests = _Window(limits.requests_per_minute, limits.window)
        if limits.tokens_per_minute is not None:
            self.tokens = _Window(limits.tokens_per_minute, limits.window)

    def enqueue(self, waiter: _Waiter) -> None:
        self.queues.setdefault(waiter.session, deque()).append(waiter)
        self.waiting += 1

    def remove(self, waiter: _Waiter) -> None:
        queue = self.queues.get(waiter.session)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            self.waiting -= 1
            if not queue:
                del self.queues[waiter.session]

    def head(self) -> _Waiter | None:
        for queue in self.queues.values():
            return queue[0]
        return None

    def _blocked_for(self, now: float, waiter: _Waiter) -> float:
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

    def pump(self, now: float, caller: _Waiter | None = None) -> float:
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

    def _grant(self, now: float, waiter: _Waiter) -> None:
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
                self.concurrency += 1
        self.pump(now)

    @property
    def _ceiling(self) -> float:
        limit = self.limits.max_concurrent
        return math.inf if limit is None else float(limit)

    def rate_limited(self, now: float, retry_after: float | None) -> None:
        self.throttled += 1
        # Requests sent before the first 429 of a burst tend to get one too: the
        # burst is one congestion event, and the limit is halved once for it.
        same_event = self._throttled_until > now
        pause = 1.0 if retry_after is None else retry_after
        self._throttled_until = max(self._throttled_until, now + pause)
        self.paused_until = max(self.paused_until, now + pause)
        if same_event:
            return
        current = min(self.concurrency, max(1.0, float(self.in_flight)))
        self.concurrency = max(1.0, math.floor(current / 2))
        self._successes = 0

    def observe_headers(self, headers: Mapping[str, str], max_pause: float) -> None:
        info = parse_rate_limits(headers, time.time())
        if info.empty:
            return
        now = trio.current_time()
        for remaining, reset in (
            (info.requests_remaining, info.requests_reset),
            (info.tokens_remaining, info.tokens_reset),
        ):
            if remaining is not None and remaining <= 0 and reset:
                self.paused_until = max(self.paused_until, now + min(reset, max_pause))

    def statistics(self, now: float) -> LaneStatistics:
        requests = tokens = 0
        if self.requests is not None:
            self.requests.prune(now)
            requests = round(self.requests.total)
        if self.tokens is not None:
            self.tokens.prune(now)
            tokens = round(self.tokens.total)
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


def _key(key: LaneKey | str) -> LaneKey:
    return (None, key) if isinstance(key, str) else key


@final
class AdmissionController:
    """Shared admission for all agents of a runtime, one lane per ``(provider, model)``.

    Args:
        limits: Limits for every lane without its own entry (default: unlimited).
        per_model: Limits by ``(provider, model)``, or by model name for any provider.
    """

    def __init__(
        self,
        limits: AdmissionLimits | None = None,
        *,
        per_model: Mapping[LaneKey | str, AdmissionLimits] | None = None,
    ) -> None:
        self._default = limits or AdmissionLimits()
        self._per_model = {_key(key): value for key, value in (per_model or {}).items()}
        self._lanes: dict[LaneKey, _Lane] = {}

    def __repr__(self) -> str:
        stats = self.statistics()
        return f"<AdmissionController lanes={len(stats.lanes)} waiting={stats.waiting} in_flight={stats.in_flight}>"

    def limits_for(self, provider: str | None, model: str) -> AdmissionLimits:
        """The limits that apply to ``(provider, model)``; never blocks."""
        found = self._per_model.get((provider, model)) or self._per_model.get((None, model))
        return found or self._default

    def _lane(self, provider: str | None, model: str) -> _Lane:
        key = (provider, model)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(key, self.limits_for(provider, model))
        return lane

    @asynccontextmanager
    async def admit(
        self,
        *,
        provider: str | None,
        model: str,
        session_id: str | None = None,
        tokens: int = 0,
        max_pause: float = math.inf,
    ) -> AsyncIterator[AdmissionTicket]:
        """Wait for admission, hold it for the block, release it on exit.

        Always a checkpoint. Waits while the lane is at its concurrency limit,
        out of budget, or paused. Cancellation while waiting leaves no trace in
        the lane. *tokens* is the up-front token estimate. *max_pause* caps
        every pause the ticket's reports cause (a ``Retry-After``, a budget
        reset): one response asking for an hour would otherwise stall the lane.

        Raises:
            ValueError: *max_pause* is negative.
        """
        if max_pause < 0:
            raise ValueError(f"max_pause must not be negative, not {max_pause!r}")
        await trio.lowlevel.checkpoint()
        lane = self._lane(provider, model)
        waiter = _Waiter(session_id, tokens, trio.current_time())
        ticket = await self._wait(lane, waiter, max_pause)
        success = False
        try:
            yield ticket
            success = True
        finally:
            lane.release(trio.current_time(), success=success)

    async def _wait(self, lane: _Lane, waiter: _Waiter, max_pause: float) -> AdmissionTicket:
        lane.enqueue(waiter)
        try:
            while not _granted(waiter):
                delay = lane.pump(trio.current_time(), waiter)
                if _granted(waiter):
                    break
                waiter.timed = math.isfinite(delay) and lane.head() is waiter
                with trio.move_on_after(delay if waiter.timed else math.inf):
                    await waiter.wake.wait()
                waiter.wake = trio.Event()
                waiter.timed = False
        except BaseException:
            if waiter.granted:
                AdmissionTicket(lane, waiter.request_charge, waiter.token_charge).refund()
                lane.release(trio.current_time(), success=False)
            else:
                lane.remove(waiter)
                lane.pump(trio.current_time())
            raise
        return AdmissionTicket(  # noqa: ASYNC910 - admit() checkpoints first
            lane, waiter.request_charge, waiter.token_charge, max_pause=max_pause
        )

    def rate_limited(self, provider: str | None, model: str, retry_after: float | None) -> None:
        """Record a 429/529 for the lane: pause it and halve its concurrency; never blocks.

        The lane pauses for *retry_after* seconds (1 when ``None``). The 429s of
        one burst, those arriving while the pause of the first is still on,
        halve the concurrency once.

        Raises:
            ValueError: *retry_after* is negative or not finite.
        """
        pause = _checked_pause(retry_after)
        self._lane(provider, model).rate_limited(trio.current_time(), pause)

    def statistics(self) -> AdmissionStatistics:
        """A snapshot of every lane; never blocks."""
        now = trio.current_time()
        return AdmissionStatistics(tuple(lane.statistics(now) for lane in self._lanes.values()))
