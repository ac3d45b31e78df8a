"""Checks of the mock's reply fields: each refuses a bad value when the reply is built.

Rendered per request, a bad value would fail only that request, with a 500 the
test under way takes for the server's, or be served as something else (a
name of ``5`` as an unnamed call, a status of 99 as no HTTP status).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import attrs

from retinue._checks import collection_error, finite_number_error
from retinue.providers._settings import HTTP_TOKEN

__all__ = [
    "check_chunks",
    "check_optional_str",
    "check_pause",
    "check_status",
    "check_str",
    "check_token_count",
    "check_tool_call_count",
    "header_pairs",
    "instances",
]


def _name(instance: object, attribute: attrs.Attribute[Any]) -> str:
    return f"{type(instance).__name__}.{attribute.name}"


def check_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a value that is no ``str``."""
    if not isinstance(value, str):
        raise TypeError(f"{_name(instance, attribute)} must be a str, not {value!r}")


def check_optional_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a value that is neither ``None`` nor a ``str``."""
    if value is not None:
        check_str(instance, attribute, value)


def check_token_count(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a value that is neither ``None`` nor an ``int`` of at least 0."""
    if value is None:
        return
    if type(value) is not int:
        raise TypeError(f"{_name(instance, attribute)} must be an int or None, not {value!r}")
    if value < 0:
        raise ValueError(f"{_name(instance, attribute)} must be at least 0, not {value!r}")


def check_chunks(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a piece count that is no ``int`` of at least 1."""
    if type(value) is not int:
        raise TypeError(f"{_name(instance, attribute)} must be an int, not {value!r}")
    if value < 1:
        raise ValueError(f"{_name(instance, attribute)} must be at least 1, not {value!r}")


def check_tool_call_count(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a count of calls that is no ``int`` of at least 0."""
    if type(value) is not int:
        raise TypeError(f"{_name(instance, attribute)} must be an int, not {value!r}")
    if value < 0:
        raise ValueError(f"{_name(instance, attribute)} must be at least 0, not {value!r}")


def check_pause(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a wait that is neither ``None`` nor a finite number of seconds >= 0."""
    if value is None:
        return
    error = finite_number_error(value, zero=True)
    if error is not None:
        expected = "a number of seconds or None" if error is TypeError else "finite and >= 0"
        raise error(f"{_name(instance, attribute)} must be {expected}, not {value!r}")


def check_status(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a value that is no HTTP status: an ``int`` from 100 to 599."""
    if type(value) is not int:
        raise TypeError(f"{_name(instance, attribute)} must be an int, not {value!r}")
    if not 100 <= value <= 599:
        raise ValueError(f"{_name(instance, attribute)} must be from 100 to 599, not {value!r}")


_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")
"""A header value as h11 sends one: printable ASCII, spaces and tabs only between."""


def _check_sendable(name: str, value: str, where: str) -> None:
    # Served, such a header would fail its request with a 500 over TCP, while the
    # in-process transport would pass it on, or fail with a bare UnicodeEncodeError.
    if HTTP_TOKEN.fullmatch(name) is None or _HEADER_VALUE.fullmatch(value) is None:
        raise ValueError(
            f"{where} holds a header no HTTP response can carry, {name!r}: {value!r:.60}: "
            "a name is letters, digits and !#$%&'*+-.^_`|~, a value printable ASCII "
            "with spaces and tabs only between"
        )


def header_pairs(headers: Iterable[object], where: str) -> tuple[tuple[str, str], ...]:
    """*headers* as a tuple of ``(name, value)`` string pairs an HTTP response can carry.

    Raises:
        TypeError: *headers* is no collection of such pairs (a mapping, say), naming *where*.
        ValueError: a name is no HTTP token, or a value holds a line break, a control
            character, a character beyond ASCII or whitespace at either end.
    """
    if collection_error(headers) is not None:
        raise TypeError(f"{where} must be (name, value) pairs, not {headers!r}")
    pairs: list[tuple[str, str]] = []
    for pair in headers:
        if not (
            isinstance(pair, tuple | list)
            and len(pair) == 2
            and isinstance(pair[0], str)
            and isinstance(pair[1], str)
        ):
            raise TypeError(f"{where} must be (name, value) pairs of str, not {pair!r}")
        _check_sendable(pair[0], pair[1], where)
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def instances(
    values: Iterable[Any], kinds: type | tuple[type, ...], where: str, what: str
) -> tuple[Any, ...]:
    """*values*, a collection of *kinds* instances, as a tuple, however given.

    Raises:
        TypeError: *values* is no collection (a str is none), or holds another
            value: "*where* must be *what*", naming the value.
    """
    if collection_error(values) is not None:
        raise TypeError(f"{where} must be {what}, not {values!r}")
    found = tuple(values)
    for value in found:
        if not isinstance(value, kinds):
            raise TypeError(f"{where} must be {what}, not {value!r}")
    return found
