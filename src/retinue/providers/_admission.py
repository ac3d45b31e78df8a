"""Admission control shared by every agent of a runtime: concurrency and rate budgets.

Each ``(provider, model)`` has a lane: a concurrency limit and two sliding
60-second budgets, one of requests and one of tokens. A token bucket of
capacity N lets 2N through in some 60 s window (a full bucket plus a
minute's refill), so the budgets are sliding windows instead: what was
admitted in the last 60 s, never more than the limit. Estimated input tokens
are charged up front and corrected with the real usage. Waiters are served
round-robin by session (FIFO within a session), so no agent starves. A 429
(or a 503 or 529: an overload) pauses the lane for its ``Retry-After`` and
halves the concurrency limit, at most once until as many requests as the last
cut left were admitted after it (as TCP cuts its window once a round trip);
the limit then grows back with each round of limit-many successes as TCP
CUBIC's window does. Rate-limit headers that report an exhausted budget pause
the lane until the reset. A request admitted
with a ``max_pause`` (``manage`` passes its retry policy's ``max_retry_after``)
causes no pause longer: a 429 asking for more pauses the lane as one that asks
for nothing, and a reset further off pauses nothing. The retries end then,
so waiting would only hold every request of the lane back before its refusal.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, final, overload

import attrs
import trio

from retinue._checks import finite_number_error

from ._lanes import DEFAULT_PAUSE, AdmissionLimits, Charge, Lane, LaneKey, LaneStatistics, Waiter
from ._model import RouteKey

__all__ = [
    "AdmissionController",
    "AdmissionLimits",
    "AdmissionStatistics",
    "AdmissionTicket",
    "LaneStatistics",
]


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


def _granted(waiter: Waiter) -> bool:
    # A call, not the attribute: within ``while not waiter.granted`` a type checker
    # narrows it to False, and (with --warn-unreachable) takes the check after pump(),
    # which grants it, as dead code.
    return waiter.granted


@final
@attrs.define(eq=False)
class AdmissionTicket:
    """One admitted request: report its usage and the provider's rate-limit signals.

    Every pause this ticket causes lasts at most the ``max_pause`` it was
    admitted with; a wait asked for beyond it is not paused for.
    """

    _lane: Lane
    _request_charge: Charge | None
    _token_charge: Charge | None
    _max_pause: float = math.inf

    def record_usage(self, tokens: int) -> None:
        """Correct the up-front token estimate with the real count; never blocks.

        Budget freed by an over-estimate admits waiting requests at once. A count
        past the lane's limit is charged as the limit: it holds the lane for a
        window all the same, and an int past a float's range (a JSON number a
        server may send) is taken too.

        Raises:
            TypeError: *tokens* is neither an int nor a float (a bool is not one).
            ValueError: *tokens* is negative, NaN or infinite.
        """
        if type(tokens) is not int or tokens < 0:
            _check_tokens(tokens)
        window = self._lane.tokens
        if self._token_charge is not None and window is not None:
            # Compared before float(): 10**400 would overflow it.
            window.correct(self._token_charge, float(min(tokens, window.limit)))
            self._lane.pump(trio.current_time())

    def observe_headers(self, headers: Mapping[str, str], *, max_pause: float = math.inf) -> None:
        """Adapt the lane to a response's rate-limit headers; never blocks.

        A budget reported exhausted pauses the lane until its reset, unless that
        is further off than the ticket's ``max_pause`` (or *max_pause*, if
        smaller): then it pauses nothing.

        Raises:
            TypeError: *headers* is no mapping, or *max_pause* neither an int nor a
                float (a bool is not one).
            ValueError: *max_pause* is negative or NaN (infinity means no cap).
        """
        # Checked as admit() checks its own: a NaN or negative cap paused for no reset.
        if not isinstance(headers, Mapping):
            raise TypeError(f"headers must be a mapping of names to values, not {headers!r:.80}")
        _check_max_pause(max_pause)
        self._lane.observe_headers(headers, min(max_pause, self._max_pause))

    def rate_limited(self, retry_after: float | None) -> None:
        """Report the request's 429, 503 or 529 to its lane; never blocks.

        As :meth:`AdmissionController.rate_limited`, with the pause (its default
        too) capped at the ticket's ``max_pause``; a *retry_after* longer than
        that pauses as ``None`` does, and so does ``math.inf`` (the ``retry_after``
        of a ``Retry-After`` too large for a float), whatever the cap.

        Raises:
            TypeError: *retry_after* is neither an int nor a float (a bool is not one).
            ValueError: *retry_after* is negative or not a number.
        """
        # An error's own retry_after is taken as it is: infinity is a wait longer than
        # any this ticket would pause for, not a broken value.
        pause = None if retry_after == math.inf else _checked_pause(retry_after)
        if pause is None or pause > self._max_pause:
            pause = DEFAULT_PAUSE
        self._lane.rate_limited(trio.current_time(), min(pause, self._max_pause))

    def refund(self) -> None:
        """Give back the request's charges (it never reached the provider)."""
        if self._request_charge is not None and self._lane.requests is not None:
            self._lane.requests.correct(self._request_charge, 0.0)
        self.record_usage(0)


def _check_max_pause(max_pause: float) -> None:
    # Infinity is no cap; NaN fails every comparison, so as a cap it would cap nothing.
    # An equality test, not isinf: it neither overflows on a huge int nor fails on a str.
    if max_pause == math.inf:
        return
    error = finite_number_error(max_pause, zero=True)
    if error is not None:
        raise error(f"max_pause must be a number of seconds >= 0 or math.inf, not {max_pause!r}")


def _check_tokens(tokens: float) -> None:
    # A count the window's sum cannot hold: a str fails whichever request next pumps the
    # lane, a negative one frees budget never spent, and NaN or infinity leaves the sum
    # NaN, so the lane admits one request per window from then on.
    error = finite_number_error(tokens, zero=True)
    if error is not None:
        raise error(f"tokens must be a finite number of tokens >= 0, not {tokens!r}")


def _checked_pause(retry_after: float | None) -> float | None:
    # An infinite pause would close the lane for good: it is refused, not obeyed.
    if retry_after is None:
        return None
    error = finite_number_error(retry_after, zero=True)
    if error is not None:
        raise error(f"retry_after must be a finite number of seconds >= 0, not {retry_after!r}")
    return retry_after


def _check_names(provider: object, model: object, session_id: object = None) -> None:
    # Another kind of name would open a lane no limits can name (provider=5), or fail
    # with "unhashable type" once queued (a list for a session).
    for name, value, optional in (
        ("provider", provider, True),
        ("model", model, False),
        ("session_id", session_id, True),
    ):
        if not isinstance(value, str) and not (optional and value is None):
            expected = "None or a str" if optional else "a str"
            raise TypeError(f"admission's {name} must be {expected}, not {value!r}")


def _key(key: LaneKey | str) -> LaneKey:
    return (None, key) if isinstance(key, str) else key


def _checked(limits: object, per_model: object) -> None:
    """Refuse limits of another kind when built: kept, they would fail the first admission
    with an AttributeError, or, under a key no request has, never apply."""
    if limits is not None and not isinstance(limits, AdmissionLimits):
        raise TypeError(f"AdmissionController limits must be AdmissionLimits, not {limits!r}")
    if per_model is None:
        return
    if not isinstance(per_model, Mapping):
        raise TypeError(
            f"AdmissionController per_model must be a mapping to AdmissionLimits, not {per_model!r}"
        )
    for key, value in per_model.items():
        provider, model = key if isinstance(key, tuple) and len(key) == 2 else (None, key)
        named = isinstance(model, str) and bool(model)
        if not named or not (provider is None or (isinstance(provider, str) and provider)):
            raise TypeError(
                "AdmissionController per_model keys must be a model name or a "
                f"(provider, model name) pair, not {key!r}"
            )
        if not isinstance(value, AdmissionLimits):
            raise TypeError(
                f"AdmissionController per_model[{key!r}] must be AdmissionLimits, not {value!r}"
            )


@final
class AdmissionController:
    """Shared admission for all agents of a runtime, one lane per ``(provider, model)``.

    Args:
        limits: Limits for every lane without its own entry (default: unlimited).
        per_model: Limits by ``(provider, model)``, or by model name for any provider.

    Raises:
        TypeError: *limits*, or a value of *per_model*, is no :class:`AdmissionLimits`,
            or a key of *per_model* neither a model name nor a ``(provider, model)``
            pair of non-empty names.
    """

    # One overload per key shape, as for ModelRouter.of: a mapping's key type is invariant.
    @overload
    def __init__(
        self,
        limits: AdmissionLimits | None = None,
        *,
        per_model: Mapping[RouteKey, AdmissionLimits] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self, limits: AdmissionLimits | None = None, *, per_model: Mapping[str, AdmissionLimits]
    ) -> None: ...
    @overload
    def __init__(
        self,
        limits: AdmissionLimits | None = None,
        *,
        per_model: Mapping[tuple[str, str], AdmissionLimits],
    ) -> None: ...
    @overload
    def __init__(
        self, limits: AdmissionLimits | None = None, *, per_model: Mapping[LaneKey, AdmissionLimits]
    ) -> None: ...
    def __init__(
        self,
        limits: AdmissionLimits | None = None,
        *,
        per_model: Mapping[Any, AdmissionLimits] | None = None,
    ) -> None:
        _checked(limits, per_model)
        self._default = limits or AdmissionLimits()
        self._per_model = {_key(key): value for key, value in (per_model or {}).items()}
        self._lanes: dict[LaneKey, Lane] = {}
        self._run: trio.lowlevel.TrioToken | None = None
        self._seen = (0.0, 0.0)

    def __repr__(self) -> str:
        # Read from the lanes, not statistics(): that reads a clock and prunes the
        # windows, and a repr is asked for anywhere (a log line, a test id, a debugger).
        lanes = self._lanes.values()
        waiting = sum(lane.waiting for lane in lanes)
        in_flight = sum(lane.in_flight for lane in lanes)
        return f"<AdmissionController lanes={len(lanes)} waiting={waiting} in_flight={in_flight}>"

    def limits_for(self, provider: str | None, model: str) -> AdmissionLimits:
        """The limits that apply to ``(provider, model)``; never blocks."""
        found = self._per_model.get((provider, model)) or self._per_model.get((None, model))
        return found or self._default

    def _follow_run(self) -> None:
        """Carry the lanes' times over to this trio run's clock, when it is a new run.

        Each run's clock counts from an origin of its own: a window or a pause
        kept in an earlier run's times would otherwise hold the lane for days
        (or end at once). The real time since the last one seen in the earlier
        run counts as time passed.
        """
        run = trio.lowlevel.current_trio_token()
        now, real = trio.current_time(), time.perf_counter()
        if run is not self._run:
            if self._run is not None:
                then, real_then = self._seen
                shift = now - then - (real - real_then)
                for lane in self._lanes.values():
                    lane.shift(shift)
            self._run = run
        self._seen = (now, real)

    def _lane(self, provider: str | None, model: str) -> Lane:
        self._follow_run()
        key = (provider, model)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = Lane(key, self.limits_for(provider, model))
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
        the lane. *tokens* is the up-front token estimate. *max_pause* bounds
        every pause the ticket's reports cause (a ``Retry-After``, a budget
        reset): one response asking for an hour would otherwise stall the lane.
        A wait asked for beyond it is not paused for (a 429's pause is then the
        default one): the caller does not wait for it either.

        Raises:
            TypeError: *max_pause* or *tokens* is neither an int nor a float (a bool
                is not one), *model* no str, or *provider* or *session_id* neither
                ``None`` nor a str.
            ValueError: *max_pause* is negative or NaN (infinity means no cap), or
                *tokens* negative, NaN or infinite.
        """
        _check_names(provider, model, session_id)
        _check_max_pause(max_pause)
        _check_tokens(tokens)
        await trio.lowlevel.checkpoint()
        lane = self._lane(provider, model)
        waiter = Waiter(session_id, tokens, trio.current_time())
        ticket = await self._wait(lane, waiter, max_pause)
        success = False
        try:
            yield ticket
            success = True
        finally:
            self._follow_run()
            lane.release(trio.current_time(), success=success)

    async def _wait(self, lane: Lane, waiter: Waiter, max_pause: float) -> AdmissionTicket:
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
                lane.remove(trio.current_time(), waiter)
                lane.pump(trio.current_time())
            raise
        return AdmissionTicket(  # noqa: ASYNC910 - admit() checkpoints first
            lane, waiter.request_charge, waiter.token_charge, max_pause=max_pause
        )

    def rate_limited(self, provider: str | None, model: str, retry_after: float | None) -> None:
        """Record a 429, 503 or 529 for the lane: pause it, halve its concurrency; never blocks.

        The lane pauses for *retry_after* seconds (1 when ``None``). The 429s of
        one burst, those arriving while the pause of the first is still on, and
        those arriving before as many requests as the last cut left were
        admitted after it, halve the concurrency once.

        Raises:
            TypeError: *retry_after* is neither an int nor a float (a bool is not one),
                *model* no str, or *provider* neither ``None`` nor a str.
            ValueError: *retry_after* is negative or not finite.
        """
        _check_names(provider, model)
        pause = _checked_pause(retry_after)
        pause = DEFAULT_PAUSE if pause is None else pause
        self._lane(provider, model).rate_limited(trio.current_time(), pause)

    def statistics(self) -> AdmissionStatistics:
        """A snapshot of every lane; never blocks.

        Outside the trio run that admits through it (after ``trio.run`` returned,
        or from a worker thread, its own ``trio.run`` included) each lane is read as
        of that run's last time plus the real time since, and the read changes
        nothing: it must not age out, or carry to another clock, charges the run,
        whose clock may be virtual, still counts.
        """
        try:
            run: trio.lowlevel.TrioToken | None = trio.lowlevel.current_trio_token()
        except RuntimeError:  # no trio run: no clock to read
            run = None
        if run is not None and run is self._run:
            self._follow_run()
            now = trio.current_time()
            return AdmissionStatistics(tuple(lane.statistics(now) for lane in self._lanes.values()))
        then, real_then = self._seen
        now = then + (time.perf_counter() - real_then)
        # Copied at once: the run may add a lane meanwhile.
        lanes = tuple(self._lanes.values())
        return AdmissionStatistics(tuple(lane.statistics(now, prune=False) for lane in lanes))
