"""Parsing JSON text that holds only what JSON writes back: frozen, or as ``json.loads`` builds it."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import NoReturn

from retinue._errors import InvalidJsonError

from ._freeze import MAX_JSON_DEPTH, FrozenDict, JsonValue, freeze_json
from ._ints import shown_short
from ._surrogates import holds_surrogate

__all__ = ["loads_finite", "loads_frozen"]


def _frozen_object(pairs: list[tuple[str, JsonValue]]) -> FrozenDict:
    frozen = FrozenDict()
    dict.update(frozen, pairs)
    if len(frozen) != len(pairs):
        raise _key_twice(pairs)
    return frozen


def _unique_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    built = dict(pairs)
    if len(built) != len(pairs):
        raise _key_twice(pairs)
    return built


def _key_twice(pairs: Sequence[tuple[str, object]]) -> InvalidJsonError:
    """The refusal of an object naming a key twice (its pairs hold one): readers keep
    either value, the frozen one only the last, so the text and its value would differ."""
    counts = Counter(key for key, _ in pairs)
    twice = next(key for key, count in counts.items() if count > 1)
    return InvalidJsonError(f"the JSON text has the key {shown_short(twice)} twice in one object")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidJsonError(f"{text} is a non-finite number")
    return value


def _no_constant(name: str) -> NoReturn:
    raise InvalidJsonError(f"{name} is a non-finite number")


# Without arrays every value this decoder builds is already frozen: objects
# come out as FrozenDicts and no float can be NaN or infinite.
_frozen_decoder = json.JSONDecoder(
    object_pairs_hook=_frozen_object, parse_float=_finite_float, parse_constant=_no_constant
)
_decode_frozen = _frozen_decoder.decode
# The decoder's own C scanner (an instance attribute typeshed does not declare).
_scan_frozen: Callable[[str, int], tuple[JsonValue, int]] = _frozen_decoder.scan_once  # type: ignore[attr-defined]
_decode = json.JSONDecoder(object_pairs_hook=_unique_object).decode
# Python's own parser reads NaN and Infinity, and a number that overflows as
# infinity: JSON cannot write either back.
_decode_finite = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant).decode


def loads_finite(text: str) -> object:
    """Parse JSON *text* as :func:`json.loads` does, refusing numbers JSON cannot write.

    Raises:
        ValueError: *text* is not JSON, or holds an integer of more than
            ``sys.get_int_max_str_digits()`` digits.
        InvalidJsonError: it holds NaN, Infinity or a number that overflows a float.
        RecursionError: it is nested too deeply to parse.
    """
    return _decode_finite(text)


def loads_frozen(text: str) -> JsonValue:
    """Parse JSON *text* straight into frozen values: ``freeze_json(json.loads(text))``.

    Raises:
        ValueError: *text* is not JSON.
        InvalidJsonError: it is JSON but not lossless (NaN, Infinity, a number
            that overflows a float, an integer with more digits than
            ``sys.get_int_max_str_digits()``, an object naming a key twice), or
            nested deeper than :data:`MAX_JSON_DEPTH` levels.
    """
    try:
        return _loads_frozen(text)
    except RecursionError:
        raise InvalidJsonError("the JSON text is nested too deeply") from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        # The one other ValueError a decode raises: int() refusing a long digit string,
        # which is JSON all the same and must not be reported as a syntax error.
        raise InvalidJsonError(
            "the JSON text holds an integer of more than "
            f"{sys.get_int_max_str_digits()} digits, too long to read"
        ) from None


def _loads_frozen(text: str) -> JsonValue:
    # A text this short, or with no more braces, cannot nest deeper than
    # MAX_JSON_DEPTH; any other takes freeze_json, which measures it. So does one
    # holding a surrogate, whose pairs only freeze_json joins (R1.6).
    if (
        "[" not in text
        and (len(text) <= MAX_JSON_DEPTH or text.count("{") <= MAX_JSON_DEPTH)
        and (text.isascii() or not holds_surrogate(text))
    ):
        # The scanner alone parses a value with nothing around it (the usual tool
        # arguments); padding, extra data and errors take the decoder's full path.
        try:
            frozen: JsonValue
            frozen, end = _scan_frozen(text, 0)
        except StopIteration:
            frozen, end = None, -1
        if end == len(text):
            return frozen
        decoded: JsonValue = _decode_frozen(text)
        return decoded
    # Arrays decode to lists, which only freeze_json turns into tuples (and it
    # measures the depth).
    return freeze_json(_decode(text))
