"""Numbers JSON writes and reads back as themselves, and values shown in error messages."""

from __future__ import annotations

import math
import sys
from typing import Any

from retinue._errors import InvalidJsonError

__all__ = [
    "NEG_SMALL_INT",
    "SHORT_INT_BITS",
    "SMALL_INT",
    "check_digits",
    "is_count",
    "is_finite_number",
    "short_int",
    "shown",
    "shown_short",
    "where",
    "writable_int",
]


def where(path: str) -> str:
    """*path* as an error message names it: the whole value when it is empty."""
    return path or "the value"


# No integer of at most this many bits has more decimal digits than the
# smallest limit ``sys.set_int_max_str_digits`` accepts, so only a longer one
# is converted to learn whether it can be written as JSON at all.
SHORT_INT_BITS: int = (10**sys.int_info.str_digits_check_threshold).bit_length() - 1


SMALL_INT: int = (1 << 30) - 1
"""Every int from ``-SMALL_INT`` to ``SMALL_INT`` is short enough for JSON to write.

A one-digit int, which the interpreter compares without a call: the cheap
test a hot validator makes before :func:`writable_int`.
"""
NEG_SMALL_INT: int = -SMALL_INT
"""``-SMALL_INT``, negated once: hot range tests would negate it on every call."""


def short_int(number: Any) -> bool:
    """Whether the int *number* is too short to need a digit check (called for ints only: hot)."""
    bits: int = number.bit_length()
    return bits <= SHORT_INT_BITS


def writable_int(value: int) -> bool:
    """Whether the int *value* has few enough digits for ``str`` (and so ``json``) to write it."""
    if value.bit_length() <= SHORT_INT_BITS:
        return True
    try:
        str(value)
    except ValueError:
        return False
    return True


def is_count(value: object) -> bool:
    """Whether *value* is a non-negative exact int short enough for JSON to write."""
    # Comparisons before the call: writable_int runs only for a huge count.
    return type(value) is int and value >= 0 and (value <= SMALL_INT or writable_int(value))


def shown(value: object) -> str:
    """``repr(value)`` for an error message, even of an int too long to convert to digits.

    Also of a value holding one anywhere (a tuple of them, say): its repr would raise.
    """
    if type(value) is int and not writable_int(value):
        return f"an integer of {value.bit_length()} bits"
    try:
        return repr(value)
    except ValueError:
        return f"a {type(value).__name__} holding an integer too long to show"
    except RecursionError:
        return f"a {type(value).__name__} nested too deeply to show"


def shown_short(value: object) -> str:
    """:func:`shown`, cut short for a one-line message: a long string to its start
    and length, any other long repr to its start and length."""
    text = shown(value)
    if isinstance(value, str) and len(text) > 60:
        return f"{text[:40]}...' ({len(value)} characters)"
    if len(text) > 200:
        return f"{text[:160]}... ({len(text)} characters)"
    return text


def check_digits(value: int, path: str) -> None:
    """Refuse (naming *path*) an integer ``str`` (and so ``json``) cannot write: too many digits."""
    if not writable_int(value):
        raise InvalidJsonError(
            f"{where(path)} is an integer of more than {sys.get_int_max_str_digits()} digits"
        )


def is_finite_number(value: object) -> bool:
    """Whether *value* is a JSON number that reloads as itself (a ``bool`` is not one)."""
    if type(value) is int:
        return writable_int(value)
    return type(value) is float and math.isfinite(value)
