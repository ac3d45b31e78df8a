"""Whether two values are written as the same JSON, which ``==`` cannot tell."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ._freeze import FrozenDict

__all__ = ["same_json"]

# The exact types whose ``==`` is JSON's equality once both sides are of the
# type (same_json compares the types first: ``True == 1`` is not asked).
_EQUAL_AS_JSON = frozenset({str, int, bool, type(None)})
_MISSING = object()


def same_json(left: object, right: object) -> bool:
    """Whether *left* and *right* are written as the same JSON (keys in any order).

    ``==`` cannot tell: Python holds ``True == 1 == 1.0`` and ``0.0 == -0.0``,
    which JSON writes as ``true``, ``1``, ``1.0``, ``0.0`` and ``-0.0``, so a value
    changed only in its type would pass for unchanged. Arrays and objects are
    compared item by item and attrs records (of one exact class) field by field;
    a part both share is not walked, so comparing values built from one another
    is cheap.
    """
    if left is right:
        return True
    kind = type(left)
    if kind is not type(right):
        return _same_across_types(left, right)
    if kind in _EQUAL_AS_JSON:
        return left == right
    if kind is FrozenDict or kind is dict:
        return _same_objects(left, right)  # type: ignore[arg-type]
    if kind is tuple or kind is list:
        return _same_arrays(left, right)  # type: ignore[arg-type]
    if kind is float:
        return _same_floats(left, right)  # type: ignore[arg-type]
    fields = getattr(kind, "__attrs_attrs__", None)
    if fields is not None:
        for field in fields:
            if field.eq and not same_json(getattr(left, field.name), getattr(right, field.name)):
                return False
        return True
    return left == right


def _same_floats(left: float, right: float) -> bool:
    # Equal, and of one sign: -0.0 is written (and read back) as itself.
    return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)


def _same_objects(left: Mapping[str, object], right: Mapping[str, object]) -> bool:
    if len(left) != len(right):
        return False
    for key, item in left.items():
        other = right.get(key, _MISSING)
        if item is not other and (other is _MISSING or not same_json(item, other)):
            return False
    return True


def _same_arrays(left: Sequence[object], right: Sequence[object]) -> bool:
    return len(left) == len(right) and all(map(same_json, left, right))


def _same_across_types(left: object, right: object) -> bool:
    """same_json of values of two types: a subclass is written as its base (a StrEnum as a str)."""
    kind = _json_kind(left)
    if kind is not _json_kind(right):
        return False
    if kind is Mapping:
        return _same_objects(left, right)  # type: ignore[arg-type]
    if kind is tuple:
        return _same_arrays(left, right)  # type: ignore[arg-type]
    if kind is float:
        return _same_floats(left, right)  # type: ignore[arg-type]
    return kind is not object and left == right


def _json_kind(value: object) -> type[Any]:
    """What *value* is written as: a scalar's type, ``tuple`` (array) or ``Mapping`` (object).

    ``bool`` cannot be subclassed, so an int subclass is never a bool. Anything
    else, an attrs record say, is ``object``: records of two classes differ.
    """
    if value is None:
        return type(None)
    for base, written in (
        (bool, bool),
        (int, int),
        (float, float),
        (str, str),
        (list | tuple, tuple),
        (Mapping, Mapping),
    ):
        if isinstance(value, base):
            return written
    return object
