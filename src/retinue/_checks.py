"""The checks of numeric settings: a finite number (a duration in seconds), a positive count."""

from __future__ import annotations

import math

__all__ = ["finite_number_error", "positive_int_error"]


def finite_number_error(
    value: object, *, zero: bool = False
) -> type[TypeError | ValueError] | None:
    """The error refusing *value* as a finite number above 0 (or at 0 too, with *zero*).

    ``TypeError`` when it is neither an ``int`` nor a ``float``, or is a ``bool``
    (``True`` is an int, but never a number of seconds); ``ValueError`` when it
    is NaN, infinite or out of range; ``None`` when it is accepted. The caller
    words the message: its own name for the setting, and what it expects.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return TypeError
    try:
        finite = math.isfinite(value)
    except OverflowError:
        # An int too large for a float: no clock or deadline can hold it.
        return ValueError
    if finite and (value >= 0 if zero else value > 0):
        return None
    return ValueError


def positive_int_error(value: object) -> type[TypeError | ValueError] | None:
    """The error refusing *value* as a count of at least 1, as :func:`finite_number_error` does.

    ``TypeError`` unless it is exactly an ``int`` (a ``bool`` or ``2.0`` is no
    count); ``ValueError`` below 1; ``None`` when it is accepted.
    """
    if type(value) is not int:
        return TypeError
    return None if value >= 1 else ValueError
