"""Lossless-JSON validation and deep immutable snapshots (R1.6, R4.5, R4.7)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, final

from ._errors import InvalidJsonError

__all__ = [
    "MAX_JSON_DEPTH",
    "NEG_SMALL_INT",
    "SMALL_INT",
    "FrozenDict",
    "JsonValue",
    "check_digits",
    "check_json",
    "freeze_json",
    "is_count",
    "is_finite_number",
    "loads_finite",
    "loads_frozen",
    "same_json",
    "shown",
    "shown_short",
    "thaw_json",
    "too_deep",
    "writable_int",
]

if TYPE_CHECKING:
    JsonValue: TypeAlias = "bool | int | float | str | tuple[JsonValue, ...] | list[JsonValue] | Mapping[str, JsonValue] | None"
else:

    class JsonValue:
        """Runtime stand-in for the recursive JSON alias, so codecs can dispatch on it."""


@final
class FrozenDict(dict[str, "JsonValue"]):
    """A ``dict`` that refuses mutation; ``json.dumps`` still writes it as an object."""

    __slots__ = ()

    def __init__(self) -> None:
        # Takes no items: only ``freeze_json`` fills a FrozenDict (with already-frozen
        # values), so a FrozenDict can be trusted as frozen all the way down. Nothing
        # to do here: ``dict.__new__`` made it empty, and a decode builds one per object.
        pass

    def __reduce__(self) -> tuple[object, ...]:
        return (freeze_json, (dict(self),))

    def _refuse(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("this JSON object is an immutable snapshot")

    __setitem__ = _refuse
    __delitem__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse  # type: ignore[assignment]
    setdefault = _refuse
    update = _refuse
    __ior__ = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda item: item[0])))


def _where(path: str) -> str:
    return path or "the value"


# How deeply a JSON value may nest (``{}`` and ``[]`` are one level, a scalar
# none). Without a fixed bound, whether a value could be frozen at append and
# whether its stored line could be decoded on load would both depend on how
# deep the Python stack happened to be at the time (in 3.11 every frame, and
# every level the C json codec enters, counts against the recursion limit of
# 1000). Freezing and decoding cost about one frame per level; the runtime
# itself sits under 80 frames deep where it freezes or loads (trio's loop, task
# coroutines, hooks, the store, cattrs; the most measured over the test suite,
# pytest's own frames included). 200 leaves several hundred frames to spare at
# both ends and still holds any JSON a model or tool realistically sends.
MAX_JSON_DEPTH = 200


def too_deep(path: str) -> InvalidJsonError:
    """The refusal of a value nested past MAX_JSON_DEPTH levels at *path*."""
    # The path of the level past the limit is long: its start says where.
    where = _where(path if len(path) <= 60 else path[:60] + "...")
    return InvalidJsonError(f"{where} is nested too deeply: more than {MAX_JSON_DEPTH} levels")


def _height(value: object) -> int:
    """The nesting depth of a frozen *value* (at most MAX_JSON_DEPTH: it was checked).

    Measured each time a FrozenDict is put inside a new value, which is rare:
    remembering it would cost every FrozenDict a slot.
    """
    kind = type(value)
    if kind is FrozenDict:
        return 1 + max(map(_height, value.values()), default=0)  # type: ignore[attr-defined]
    if kind is tuple:
        return 1 + max(map(_height, value), default=0)  # type: ignore[call-overload]
    return 0


def freeze_json(value: object, path: str = "") -> JsonValue:
    """Validate *value* as lossless JSON and return a deep immutable copy.

    Lists become tuples and objects become :class:`FrozenDict`. Raises
    :class:`InvalidJsonError` naming the offending path (NaN, bytes, sets,
    non-string keys, cycles, nesting deeper than :data:`MAX_JSON_DEPTH`,
    arbitrary objects). Never blocks.
    """
    kind = type(value)
    if value is None or (kind in _FROZEN_LEAVES and (kind is not int or _short(value))):
        return value  # type: ignore[return-value]
    try:
        return _freeze_fast(value, 0)
    except _NotFastError:
        pass
    try:
        return _freeze(value, path, set(), 0)
    except RecursionError:
        raise InvalidJsonError(f"{_where(path)} is nested too deeply") from None


_FROZEN_LEAVES = frozenset({str, int, bool, FrozenDict})
_FAST_LEAVES = frozenset({str, int, bool})

# No integer of at most this many bits has more decimal digits than the
# smallest limit ``sys.set_int_max_str_digits`` accepts, so only a longer one
# is converted to learn whether it can be written as JSON at all.
_SHORT_INT_BITS: int = (10**sys.int_info.str_digits_check_threshold).bit_length() - 1


SMALL_INT: int = (1 << 30) - 1
"""Every int from ``-SMALL_INT`` to ``SMALL_INT`` is short enough for JSON to write.

A one-digit int, which the interpreter compares without a call: the cheap
test a hot validator makes before :func:`writable_int`.
"""
NEG_SMALL_INT: int = -SMALL_INT
"""``-SMALL_INT``, negated once: hot range tests would negate it on every call."""


def _short(number: Any) -> bool:
    """Whether the int *number* is too short to need a digit check (called for ints only: hot)."""
    bits: int = number.bit_length()
    return bits <= _SHORT_INT_BITS


def writable_int(value: int) -> bool:
    """Whether the int *value* has few enough digits for ``str`` (and so ``json``) to write it."""
    if value.bit_length() <= _SHORT_INT_BITS:
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
            f"{_where(path)} is an integer of more than {sys.get_int_max_str_digits()} digits"
        )


class _NotFastError(Exception):
    """Raised by the fast path for anything it leaves to the checked path."""


# Deeper values (and cycles) take the checked path, which names the problem.
_FAST_DEPTH = 32


def _freeze_fast(value: object, depth: int) -> JsonValue:
    """Freeze exact builtin JSON types without building paths; ``_NotFastError`` otherwise."""
    kind = type(value)
    if value is None or kind in _FAST_LEAVES:
        if kind is int and not _short(value):
            raise _NotFastError
        return value  # type: ignore[return-value]
    if kind is float and math.isfinite(value):  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    if kind is FrozenDict and depth + _height(value) <= MAX_JSON_DEPTH:
        return value  # type: ignore[return-value]
    if depth == _FAST_DEPTH:
        raise _NotFastError
    if kind is dict:
        items: dict[str, JsonValue] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
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
        if depth + _height(value) > MAX_JSON_DEPTH:
            raise too_deep(path)
        return value
    # Subclasses (a StrEnum or IntEnum member, say) become the plain JSON value they stand for.
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        number = int.__int__(value)
        if number.bit_length() > _SHORT_INT_BITS:
            check_digits(number, path)
        return number
    if isinstance(value, float):
        if math.isfinite(value):
            return float.__float__(value)
        raise InvalidJsonError(f"{_where(path)} is a non-finite number ({value!r})")
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
                    raise InvalidJsonError(f"{_where(path)} has a non-string key {key!r}")
                # Written as the str it holds, as a str value is.
                key = str.__str__(key)  # noqa: PLW2901
            if key in items:
                # Two keys a subclass's ``==`` told apart, the same str once written.
                raise InvalidJsonError(f"{_where(path)} has the key {key!r} twice")
            items[key] = _freeze(item, f"{path}.{key}" if path else key, seen, depth + 1)
        seen.discard(marker)
        frozen_dict = FrozenDict()
        dict.update(frozen_dict, items)
        return frozen_dict
    raise InvalidJsonError(f"{_where(path)} is not JSON: {type(value).__name__}")


def _enter(container: object, path: str, seen: set[int], depth: int) -> int:
    """Mark *container* as being frozen; refuse a cycle or one level too many."""
    if depth == MAX_JSON_DEPTH:
        raise too_deep(path)
    marker = id(container)
    if marker in seen:
        raise InvalidJsonError(f"{_where(path)} contains a cycle")
    seen.add(marker)
    return marker


def _frozen_object(pairs: list[tuple[str, JsonValue]]) -> FrozenDict:
    frozen = FrozenDict()
    dict.update(frozen, pairs)
    return frozen


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
_decode = json.JSONDecoder().decode
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
            ``sys.get_int_max_str_digits()``), or nested deeper than
            :data:`MAX_JSON_DEPTH` levels.
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
    # MAX_JSON_DEPTH; any other takes freeze_json, which measures it.
    if "[" not in text and (len(text) <= MAX_JSON_DEPTH or text.count("{") <= MAX_JSON_DEPTH):
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


def is_finite_number(value: object) -> bool:
    """Whether *value* is a JSON number that reloads as itself (a ``bool`` is not one)."""
    if type(value) is int:
        return writable_int(value)
    return type(value) is float and math.isfinite(value)


def check_json(value: object, path: str = "") -> None:
    """Raise :class:`InvalidJsonError` unless *value* is lossless JSON."""
    freeze_json(value, path)


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


_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})


def thaw_json(value: JsonValue) -> object:
    """Return a plain mutable copy (lists and dicts) of a JSON value."""
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
    return value
