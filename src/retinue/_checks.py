"""The checks of settings: a finite number (seconds), a positive count, a collection of items,
a path a file can have."""

from __future__ import annotations

import inspect
import math
import os
import sys
from collections.abc import Iterable, Mapping

__all__ = [
    "collection_error",
    "finite_number_error",
    "needs_an_instance",
    "positive_int_error",
    "unnamable_path",
]


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


def collection_error(value: object) -> type[TypeError] | None:
    """The error refusing *value* as a collection of items, as :func:`finite_number_error` does.

    ``TypeError`` unless it is iterable, or when it is a ``str``, ``bytes`` or a
    mapping: iterable too, but never meant as its letters, bytes or keys.
    ``None`` when it is accepted; its items are the caller's to check.
    """
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return TypeError
    return None


def needs_an_instance(value: object, *methods: str) -> bool:
    """Whether *value* is a class whose *methods* need an instance: given where an
    adapter or a store belongs, its instance was meant. A class whose methods are
    static or class methods serves as it is."""
    if not isinstance(value, type):
        return False
    return any(inspect.isfunction(inspect.getattr_static(value, name, None)) for name in methods)


def unnamable_path(text: str) -> str | None:
    """Why no file can have the path *text* (``"contains a NUL character, ..."``), or None.

    A NUL character, or a character the file system's encoding cannot write (a lone
    surrogate no bytes decoded with ``surrogateescape`` gave): the OS layer refuses
    either with a bare ``ValueError`` or ``UnicodeEncodeError`` that names no setting.
    """
    if "\0" in text:
        return "contains a NUL character, which no file name can hold"
    try:
        os.fsencode(text)
    except UnicodeEncodeError as exc:
        return (
            f"holds {text[exc.start]!r} at position {exc.start}, which the file system's "
            f"encoding ({sys.getfilesystemencoding()}) cannot write"
        )
    return None
