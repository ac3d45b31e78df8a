"""Mock server timing: the delays it adds, fixed or drawn per request, and endless streams."""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Callable
from typing import Any, TypeAlias, final

import attrs

from retinue._checks import finite_number_error
from retinue._jsonschema import is_number

__all__ = ["Delay", "Endless", "Timing"]

Delay: TypeAlias = float | Callable[[random.Random], float]
"""Seconds, fixed or drawn from a distribution (a function of the request's RNG)."""


def _as_float(seconds: float) -> float:
    """*seconds* as a float: one past a float's range (``10**400``, or a ``Fraction`` of it)
    is ``math.inf``, or ``-math.inf`` below it, since trio's clock cannot add it to the time.

    Raises:
        TypeError: *seconds* is no real number, or a bool (a drawn ``"5"``, which
            ``float`` would read, is no number of seconds either), as a fixed delay
            is refused when built.
    """
    if type(seconds) is float:
        return seconds  # the usual draw: a check per chunk would triple its cost
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise TypeError(f"a delay must be a number of seconds, not {seconds!r:.80}")
    try:
        return float(seconds)
    except OverflowError:
        return math.inf if seconds > 0 else -math.inf


def _valid_delay(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a fixed delay that is no number of seconds >= 0, or a function of the RNG."""
    if not callable(value):
        _check_seconds(instance, attribute, value, " (or a function of the request's RNG)")


def _check_seconds(
    instance: object, attribute: attrs.Attribute[Any], value: object, besides: str
) -> None:
    """Refuse *value* unless it is a number of seconds >= 0 (or *besides*, which the
    message names); ``inf``, or a number too large for a float (``10**400``), is never.

    Checked when built: drawn per request, a bad one would fail each request
    mid-stream, a truncation no client can tell from an injected one.
    """
    if is_number(value) and _as_float(value) == math.inf:
        return
    error = finite_number_error(value, zero=True)
    if error is not None:
        expected = "a number of seconds" if error is TypeError else "at least 0"
        name = f"{type(instance).__name__}.{attribute.name}"
        raise error(f"{name} must be {expected}{besides}, not {value!r}")


def _valid_interval(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse an interval that is no number of seconds >= 0, a function too: a Timing's
    delay may be one, drawn per request, but the stream sleeps the interval as it is."""
    if callable(value):
        raise TypeError(f"Endless.interval must be a number of seconds, not {value!r}")
    _check_seconds(instance, attribute, value, "")


@final
@attrs.frozen
class Endless:
    """A 200 stream that never ends: a text delta every ``interval`` seconds.

    Raises:
        TypeError, ValueError: *interval* is not a number of seconds >= 0.
    """

    interval: float = attrs.field(default=0.05, validator=_valid_interval)


@final
@attrs.frozen
class Timing:
    """Delays the server adds: before the headers, before the first event, between events,
    and after a stream's last event before its body ends (``linger``).

    Each is seconds (``inf``, or a number too large for a float: never) or a function of
    the request's RNG, drawn per request. A stream that lingers for ever is held open
    after its last event until the client closes it, as a proxy keeping the connection
    may hold it.

    Raises:
        TypeError, ValueError: a fixed delay is not a number of seconds >= 0.
    """

    latency: Delay = attrs.field(default=0.0, validator=_valid_delay)
    first_token: Delay = attrs.field(default=0.0, validator=_valid_delay)
    inter_chunk: Delay = attrs.field(default=0.0, validator=_valid_delay)
    linger: Delay = attrs.field(default=0.0, kw_only=True, validator=_valid_delay)

    @staticmethod
    def draw(delay: Delay, rng: random.Random) -> float:
        """The seconds *delay* stands for, drawn now; ``math.inf`` for a number too large
        for a float, a wait longer than any other (never)."""
        # Converted here: a sleep for a number past a float's range would fail with an
        # OverflowError out of the request, past its 500.
        return max(0.0, _as_float(delay(rng) if callable(delay) else delay))
