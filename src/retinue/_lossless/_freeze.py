"""Lossless-JSON validation into deep immutable snapshots, and plain copies of them (R4.5, R4.7)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeAlias, final

from retinue._errors import InvalidJsonError
from retinue._readonly import ReadOnlyDict

from ._depth import Levels, deeper_than
from ._ints import SHORT_INT_BITS, check_digits, short_int, where
from ._surrogates import joined_surrogates

__all__ = [
    "JSON_LEVELS",
    "MAX_JSON_DEPTH",
    "FrozenDict",
    "JsonValue",
    "check_json",
    "freeze_json",
    "thaw_json",
    "too_deep",
]

if TYPE_CHECKING:
    JsonValue: TypeAlias = "bool | int | float | str | tuple[JsonValue, ...] | list[JsonValue] | Mapping[str, JsonValue] | None"
    """A JSON value as retinue holds it: a bool, int, float, str, None, or a list, tuple
    or mapping of them (frozen where it is kept)."""
else:

    class JsonValue:
        """Runtime stand-in for the recursive JSON alias, so codecs can dispatch on it."""


@final
class FrozenDict(ReadOnlyDict[str, "JsonValue"]):
    """A ``dict`` that refuses mutation; ``json.dumps`` still writes it as an object."""

    __slots__ = ()

    def __init__(self) -> None:
        # Takes no items: only ``freeze_json`` fills a FrozenDict (with already-frozen
        # values), so a FrozenDict can be trusted as frozen all the way down. Nothing
        # to do here: ``dict.__new__`` made it empty, and a decode builds one per object.
        pass

    refusal = "this JSON object is an immutable snapshot"

    def __reduce__(self) -> tuple[object, ...]:
        return (freeze_json, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda item: item[0])))


# The containers of a JSON value, plain or frozen: each is one level to deeper_than.
JSON_LEVELS: Levels = {dict: dict.values, FrozenDict: dict.values, list: iter, tuple: iter}


# How deeply a JSON value may nest (``{}`` and ``[]`` are one level, a scalar
# none). A fixed bound makes whether a value can be frozen at append, and
# whether its stored line can be decoded on load, independent of how deep the
# Python stack is at the time (in 3.11 every frame, and every level the C json
# codec enters, counts against the recursion limit of 1000). Freezing and
# decoding cost about one frame per level; the runtime itself sits under 80
# frames deep at the points it freezes or loads (trio's loop, task
# coroutines, hooks, the store, cattrs; the most measured over the test suite,
# pytest's own frames included). 200 leaves several hundred frames to spare at
# both ends and still holds any JSON a model or tool realistically sends.
MAX_JSON_DEPTH = 200


def too_deep(path: str) -> InvalidJsonError:
    """The refusal of a value nested past MAX_JSON_DEPTH levels at *path*."""
    # The path of the level past the limit is long: its start says where.
    place = where(path if len(path) <= 60 else path[:60] + "...")
    return InvalidJsonError(f"{place} is nested too deeply: more than {MAX_JSON_DEPTH} levels")


def freeze_json(value: object, path: str = "") -> JsonValue:
    """Validate *value* as lossless JSON and return a deep immutable copy.

    Lists become tuples and objects become :class:`FrozenDict`. Raises
    :class:`InvalidJsonError` naming the offending path (NaN, bytes, sets,
    non-string keys, cycles, nesting deeper than :data:`MAX_JSON_DEPTH`,
    arbitrary objects). Never blocks.
    """
    kind = type(value)
    if kind is str:
        return value if value.isascii() else joined_surrogates(value)  # type: ignore[attr-defined,arg-type,return-value]
    if value is None or (kind in _FROZEN_LEAVES and (kind is not int or short_int(value))):
        return value  # type: ignore[return-value]
    try:
        return _freeze_fast(value, 0)
    except _NotFastError:
        pass
    try:
        return _freeze(value, path, set(), 0)
    except RecursionError:
        raise InvalidJsonError(f"{where(path)} is nested too deeply") from None


_FROZEN_LEAVES = frozenset({str, int, bool, FrozenDict})
_FAST_LEAVES = frozenset({str, int, bool})


class _NotFastError(Exception):
    """Raised by the fast path for anything it leaves to the checked path."""


# Deeper values (and cycles) take the checked path, which names the problem.
_FAST_DEPTH = 32


def _freeze_fast(value: object, depth: int) -> JsonValue:
    """Freeze exact builtin JSON types without building paths; ``_NotFastError`` otherwise."""
    kind = type(value)
    if value is None or kind in _FAST_LEAVES:
        if kind is int and not short_int(value):
            raise _NotFastError
        if kind is str and not value.isascii() and joined_surrogates(value) is not value:  # type: ignore[attr-defined,arg-type]
            raise _NotFastError
        return value  # type: ignore[return-value]
    if kind is float and math.isfinite(value):  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    # Measured each time a FrozenDict is put inside a new value, which is rare:
    # remembering its depth would cost every FrozenDict a slot.
    if kind is FrozenDict and not deeper_than(value, MAX_JSON_DEPTH - depth, JSON_LEVELS):
        return value  # type: ignore[return-value]
    if depth == _FAST_DEPTH:
        raise _NotFastError
    if kind is dict:
        items: dict[str, JsonValue] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or (not key.isascii() and joined_surrogates(key) is not key):
                raise _NotFastError
            items[key] = _freeze_fast(item, depth + 1)
        frozen = FrozenDict()
        dict.update(frozen, items)
        return frozen
    if kind is list or kind is tuple:
        return tuple([_freeze_fast(item, depth + 1) for item in value])  # type: ignore[attr-defined]
    raise _NotFastError


def _freeze(value: object, path: str, seen: set[int], depth: int) -> JsonValue:
    """The checked path: *depth* is how many arrays and objects hold *value*."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, FrozenDict):
        if deeper_than(value, MAX_JSON_DEPTH - depth, JSON_LEVELS):
            raise too_deep(path)
        return value
    # Subclasses (a StrEnum or IntEnum member, say) become the plain JSON value they stand for.
    if isinstance(value, str):
        return joined_surrogates(str.__str__(value))
    if isinstance(value, int):
        number = int.__int__(value)
        if number.bit_length() > SHORT_INT_BITS:
            check_digits(number, path)
        return number
    if isinstance(value, float):
        if math.isfinite(value):
            return float.__float__(value)
        raise InvalidJsonError(f"{where(path)} is a non-finite number ({value!r})")
    if isinstance(value, list | tuple):
        marker = _enter(value, path, seen, depth)
        # A loop, not a generator: one frame per level, as the decoder takes.
        frozen_items: list[JsonValue] = []
        for i, item in enumerate(value):
            frozen_items.append(_freeze(item, f"{path}[{i}]", seen, depth + 1))
        seen.discard(marker)
        return tuple(frozen_items)
    if isinstance(value, Mapping):
        marker = _enter(value, path, seen, depth)
        items: dict[str, JsonValue] = {}
        for key, item in value.items():
            if type(key) is not str:
                if not isinstance(key, str):
                    raise InvalidJsonError(f"{where(path)} has a non-string key {key!r}")
                # Written as the str it holds, as a str value is.
                key = str.__str__(key)  # noqa: PLW2901
            key = joined_surrogates(key)  # noqa: PLW2901
            if key in items:
                # Two keys a subclass's ``==`` told apart, the same str once written.
                raise InvalidJsonError(f"{where(path)} has the key {key!r} twice")
            items[key] = _freeze(item, f"{path}.{key}" if path else key, seen, depth + 1)
        seen.discard(marker)
        frozen_dict = FrozenDict()
        dict.update(frozen_dict, items)
        return frozen_dict
    raise InvalidJsonError(f"{where(path)} is not JSON: {type(value).__name__}")


def _enter(container: object, path: str, seen: set[int], depth: int) -> int:
    """Mark *container* as being frozen; refuse a cycle or one level too many."""
    if depth == MAX_JSON_DEPTH:
        raise too_deep(path)
    marker = id(container)
    if marker in seen:
        raise InvalidJsonError(f"{where(path)} contains a cycle")
    seen.add(marker)
    return marker


def check_json(value: object, path: str = "") -> None:
    """Raise :class:`InvalidJsonError` unless *value* is lossless JSON."""
    freeze_json(value, path)


_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})


def thaw_json(value: JsonValue) -> object:
    """Return a plain mutable copy (lists, dicts and exact strs) of a JSON value."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return value
    # The common shapes, without a call per leaf (tool arguments are thawed per call).
    if kind is FrozenDict or kind is dict:
        return {
            key: item if type(item) in _LEAF_TYPES else thaw_json(item)
            for key, item in value.items()  # type: ignore[union-attr]
        }
    if kind is tuple or kind is list:
        return [item if type(item) in _LEAF_TYPES else thaw_json(item) for item in value]  # type: ignore[union-attr]
    if isinstance(value, tuple | list):
        return [thaw_json(item) for item in value]
    # A frozen JSON object is a FrozenDict, a dict subclass: test that before
    # the (much slower) abstract Mapping check.
    if isinstance(value, (dict, Mapping)):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, str):
        # A record's str field may hold a subclass (a StrEnum member): the copy is
        # the str its JSON holds, which a loader's exact type checks take.
        return str.__str__(value)
    return value
