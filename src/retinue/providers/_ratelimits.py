"""Parse providers' rate-limit and retry-after response headers: the budget left and the
wait a response asks for."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from datetime import MAXYEAR, UTC, datetime
from typing import final

import attrs

__all__ = [
    "RateLimitInfo",
    "parse_duration",
    "parse_rate_limits",
    "retry_after_seconds",
    "spent_budget_wait",
    "wait_number",
]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_ONE_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")
_LONGEST_DURATION = 64


@final
@attrs.frozen
class RateLimitInfo:
    """What a response said about the remaining budget, and when it resets (seconds from now)."""

    requests_remaining: int | None = None
    requests_reset: float | None = None
    tokens_remaining: int | None = None
    tokens_reset: float | None = None

    @property
    def empty(self) -> bool:
        """Whether no rate-limit header was found."""
        return self.requests_remaining is None and self.tokens_remaining is None


def wait_number(text: str) -> float | None:
    """*text* as a number of seconds (or milliseconds) to wait, if it is one >= 0.

    A number too large for a float (``1e400``, ``inf``) is ``math.inf``: a wait
    longer than any other, as ``1e9`` is a long one. ``None`` for NaN, a negative
    number and anything else: no wait was given.
    """
    try:
        value = float(text)
    except ValueError:
        return None
    # NaN fails the comparison too.
    return value if value >= 0 else None


def parse_duration(text: str) -> float | None:
    """Parse OpenAI's reset durations (``"12ms"``, ``"1s"``, ``"6m0s"``, ``"1h2m3.5s"``).

    A duration too large for a float is ``math.inf``, as :func:`wait_number` has it.
    """
    text = text.strip()
    if len(text) > _LONGEST_DURATION:
        return _long_duration(text)
    seconds = wait_number(text)
    if seconds is not None:
        return seconds
    parts = _DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        return None
    return sum(float(amount) * _UNITS[unit] for amount, unit in parts)


def _long_duration(text: str) -> float | None:
    """A reset too long to be scanned for parts: read only as one number and unit.

    No reset is written so long, and scanning one for parts costs its length
    squared. A plain number that long is a huge one, not garbage: its wait is
    read as such (``math.inf`` past a float's range), as a ``Retry-After`` is.
    """
    match = _ONE_DURATION.fullmatch(text)
    if match is None:
        return None
    return float(match[1]) * _UNITS[match[2] or "s"]


def _reset(text: str | None, wall_now: float) -> float | None:
    if text is None:
        return None
    seconds = parse_duration(text)
    if seconds is not None:
        return seconds
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        # A reset is an RFC 3339 time, which names its offset: one that does not is taken
        # as UTC. Read in the host's zone it would be hours off, and timestamp() could
        # refuse it (a naive 0001-01-01 east of UTC).
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, moment.timestamp() - wall_now)


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(float(text))
    except (ValueError, OverflowError):  # OverflowError: "inf", "1e400"
        return None


def parse_rate_limits(headers: Mapping[str, str], wall_now: float) -> RateLimitInfo:
    """Read OpenAI ``x-ratelimit-*`` or Anthropic ``anthropic-ratelimit-*`` headers.

    *wall_now* is the current Unix time, for Anthropic's absolute reset times.
    """
    get = headers.get
    if (
        get("x-ratelimit-remaining-requests") is not None
        or get("x-ratelimit-remaining-tokens") is not None
    ):
        return RateLimitInfo(
            _int(get("x-ratelimit-remaining-requests")),
            _reset(get("x-ratelimit-reset-requests"), wall_now),
            _int(get("x-ratelimit-remaining-tokens")),
            _reset(get("x-ratelimit-reset-tokens"), wall_now),
        )
    prefix = "anthropic-ratelimit-"
    tokens = "tokens" if get(prefix + "tokens-remaining") is not None else "input-tokens"
    return RateLimitInfo(
        _int(get(prefix + "requests-remaining")),
        _reset(get(prefix + "requests-reset"), wall_now),
        _int(get(f"{prefix}{tokens}-remaining")),
        _reset(get(f"{prefix}{tokens}-reset"), wall_now),
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for: ``retry-after-ms`` first, then ``retry-after``.

    ``retry-after`` may be seconds or an HTTP date; a date in the past gives 0.
    A wait too long for a float (``1e400``, ``inf``, a date past the year 9999)
    is ``math.inf``: longer than any ``max_retry_after``, as it was asked to be.
    Returns ``None`` when neither header gives a wait: absent, NaN, negative or
    unreadable.
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        milliseconds = wait_number(value)
        if milliseconds is not None:
            return milliseconds / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = wait_number(value)
    return _http_date_delay(value) if seconds is None else seconds


def _http_date_delay(value: str) -> float | None:
    from email.utils import parsedate_to_datetime, parsedate_tz

    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        # A date no datetime holds is a wait as long as any other too large to hold.
        fields = parsedate_tz(value)
        return math.inf if fields is not None and fields[0] > MAXYEAR else None
    if moment.tzinfo is None:
        # An HTTP date is UTC whatever its form (RFC 9110), asctime's that names no
        # zone and a -0000 too: read in the host's zone, it would be hours off.
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, moment.timestamp() - time.time())


def spent_budget_wait(headers: Mapping[str, str]) -> float | None:
    """Seconds until a budget the rate-limit headers report spent is back; ``None`` if none is.

    The longest reset of the budgets at 0 (requests, tokens): until then the
    provider refuses the request again.
    """
    limits = parse_rate_limits(headers, time.time())
    resets = [
        reset
        for remaining, reset in (
            (limits.requests_remaining, limits.requests_reset),
            (limits.tokens_remaining, limits.tokens_reset),
        )
        if remaining is not None and remaining <= 0 and reset
    ]
    return max(resets, default=None)
