"""JSON Schema as the tools' validator reads it: JSON types, equality, ``$ref``, constraints.

Pure and shared: the tools' argument validator judges with it, and the mock
provider's argument generator draws what that judgement accepts. Numbers
(``minimum``, ``multipleOf``, ...), strings (``minLength``, ``pattern``, ...)
and the sizes of arrays and objects, with ``uniqueItems``: each compiled once
into a check shared by the reference validator and its fast path, so that
both judge alike. A keyword whose value is malformed (``"minimum": "1"``, an
invalid pattern) constrains nothing here: the tools refuse such a schema when
a tool is built, and a generator reading any schema must not fail on one.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence, Sized
from fractions import Fraction
from typing import Any, TypeGuard, cast
from urllib.parse import unquote

from retinue._patterns import ending_at_text_end

__all__ = [
    "CONSTRAINTS",
    "MAX_REF_HOPS",
    "Check",
    "constraint_checks",
    "constraint_problem",
    "decimal",
    "is_array",
    "is_exact_integer",
    "is_inexact_integer",
    "is_number",
    "is_type",
    "json_key",
    "json_type_name",
    "pointer_tokens",
    "resolve_ref",
    "schema_list",
    "type_names",
]

Check = Callable[[object], "str | None"]
"""One compiled constraint: what *value* breaks (without its path), or ``None``."""

MAX_REF_HOPS = 16
"""``$ref``s in a row followed to read what a schema is (a schema no tool accepts may loop)."""


# -- JSON values ---------------------------------------------------------------------


def is_number(value: object) -> TypeGuard[int | float]:
    """Whether *value* is a JSON number (a bool is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_array(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    """Whether *value* is a JSON array: a list as parsed, or a tuple as frozen or written."""
    return isinstance(value, list | tuple)


# Below this magnitude a float holds every integer, and a JSON number that denotes an
# integer reads as exactly that float. From here on floats skip integers: ``1e25`` reads as
# 10000000000000000905969664.0 and ``9007199254740993.0`` as 9007199254740992.0, so the float
# no longer says which integer the text wrote.
_EXACT_LIMIT = 2**53


def is_exact_integer(value: float) -> bool:
    """Whether the float *value* is an integer that tells which integer the JSON text wrote."""
    return value.is_integer() and -_EXACT_LIMIT < value < _EXACT_LIMIT


def is_inexact_integer(value: object) -> TypeGuard[float]:
    """Whether *value* is a float with no fraction, too large to tell which integer was written."""
    return type(value) is float and value.is_integer() and not is_exact_integer(value)


def json_type_name(value: object) -> str:
    """Return the JSON type name of *value* (``"object"``, ``"integer"``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if is_array(value):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def is_type(value: object, name: str) -> bool:
    """Whether *value* is of the JSON type *name*: ``3.0`` is an integer, ``true`` no number.

    A float with no fraction is an ``integer`` only below 2**53 in magnitude,
    where it still tells which integer the JSON text wrote.
    """
    actual = json_type_name(value)
    if name == "number":
        return actual in ("integer", "number")
    if name == "integer" and actual == "number":
        return isinstance(value, float) and is_exact_integer(value)
    return actual == name


def json_key(value: object) -> object:
    """A hashable key equal for JSON-equal values: ``1`` and ``1.0`` alike, ``true`` and ``1`` not.

    An integral float past 2**53 equals no int (see :func:`is_exact_integer`).
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        # An integral float past 2**53 does not say which integer its text wrote:
        # equal to another such float, never to an int.
        return ("inexact", value) if is_inexact_integer(value) else ("number", value)
    if is_array(value):
        return ("array", tuple(json_key(item) for item in value))
    if isinstance(value, Mapping):
        return ("object", frozenset((key, json_key(item)) for key, item in value.items()))
    return ("other", id(value))


def decimal(number: float) -> Fraction:
    """*number* exactly as its JSON text reads: ``0.1`` is one tenth, not the float nearest it.

    Raises:
        ValueError: *number* is infinite or NaN, which no JSON text writes.
    """
    return Fraction(number) if type(number) is int else Fraction(repr(number))


# -- reading a node ----------------------------------------------------------------


def schema_list(value: object) -> Sequence[object]:
    """The members of an array keyword (``allOf``, ``enum``, ``required``, ...); none if malformed."""
    return value if isinstance(value, list | tuple) else ()


def type_names(schema: Mapping[str, object]) -> list[str] | None:
    """The type names *schema*'s ``type`` allows, or ``None`` when it has no ``type``."""
    kind = schema.get("type")
    if kind is None:
        return None
    if isinstance(kind, str):
        return [kind]
    return [name for name in schema_list(kind) if isinstance(name, str)]


# -- constraints of one node ----------------------------------------------------

_BOUNDS: dict[str, tuple[Callable[[Any, Any], Any], str]] = {
    "minimum": (operator.ge, ">="),
    "maximum": (operator.le, "<="),
    "exclusiveMinimum": (operator.gt, ">"),
    "exclusiveMaximum": (operator.lt, "<"),
}


def _bound(keyword: str, limit: object) -> Check | None:
    # A boolean is no bound: draft 4's "exclusiveMinimum": true would read as "> 1".
    if not is_number(limit):
        return None
    holds, sign = _BOUNDS[keyword]
    inexact_limit = is_inexact_integer(limit)

    def check(value: object) -> str | None:
        if not is_number(value):
            return None
        if inexact_limit or is_inexact_integer(value):
            if _holds_as_written(holds, value, limit):
                return None
        elif holds(value, limit):
            return None
        return f"must be {sign} {limit!r}, got {value!r}"

    return check


def _holds_as_written(holds: Callable[[Any, Any], Any], value: float, limit: float) -> bool:
    """Whether the bound holds for the numbers as their JSON text reads them.

    Past 2**53 a float is not the number written: ``1e25`` reads as
    10000000000000000905969664, above a ``maximum`` of ``10**25``.
    """
    try:
        return bool(holds(decimal(value), decimal(limit)))
    except ValueError:  # infinite or NaN: read as the float it is
        return bool(holds(value, limit))


def _multiple_of(step: object) -> Check | None:
    if not is_number(step) or step == 0 or (isinstance(step, float) and not math.isfinite(step)):
        return None
    exact = decimal(step)

    def check(value: object) -> str | None:
        if not is_number(value) or _divides(value, step, exact):
            return None
        return f"must be a multiple of {step!r}, got {value!r}"

    return check


def _divides(value: float, step: float, exact: Fraction) -> bool:
    if type(value) is int and type(step) is int:
        return value % step == 0
    # Exact in decimal, as the JSON text reads: 0.3 is a multiple of 0.1.
    try:
        return (decimal(value) / exact).denominator == 1
    except ValueError:  # infinite or NaN: a multiple of nothing
        return False


# keyword: (the JSON type whose size it bounds, whether the bound is a least one)
_SIZES: dict[str, tuple[str, bool]] = {
    "minLength": ("string", True),
    "maxLength": ("string", False),
    "minItems": ("array", True),
    "maxItems": ("array", False),
    "minProperties": ("object", True),
    "maxProperties": ("object", False),
}
_UNITS = {
    "string": ("character", "characters"),
    "array": ("item", "items"),
    "object": ("property", "properties"),
}


def _size(keyword: str, limit: object) -> Check | None:
    kind, least = _SIZES[keyword]
    # int() would read True as 1, "3" as 3 and 1.5 as 1: none is a size.
    if not is_number(limit) or not _whole(limit):
        return None
    bound = int(limit)
    one, many = _UNITS[kind]
    wanted = f"{'at least' if least else 'at most'} {bound} {one if bound == 1 else many}"

    def check(value: object) -> str | None:
        if json_type_name(value) != kind:
            return None
        # len() counts a string's code points, as JSON Schema does.
        size = len(cast("Sized", value))
        if (size >= bound) if least else (size <= bound):
            return None
        return f"must have {wanted}, got {size}"

    return check


def _whole(number: float) -> bool:
    return type(number) is int or (math.isfinite(number) and number.is_integer())


def _pattern(pattern: object) -> Check | None:
    if not isinstance(pattern, str):
        return None  # str() would make a pattern of anything: 5 of "5"
    try:
        compiled = re.compile(pattern)
    except (re.error, OverflowError):
        return None
    with contextlib.suppress(re.error, OverflowError):
        # If the reading cannot be compiled, Python's own is kept: never none at all.
        compiled = re.compile(ending_at_text_end(pattern))

    def check(value: object) -> str | None:
        # search, not match: a JSON Schema pattern is not anchored.
        if not isinstance(value, str) or compiled.search(value) is not None:
            return None
        return f'must match the pattern "{pattern}"'

    return check


def _unique_items(unique: object) -> Check | None:
    if unique is not True:
        return None

    def check(value: object) -> str | None:
        if not is_array(value):
            return None
        seen: dict[object, int] = {}
        for index, item in enumerate(value):
            first = seen.setdefault(json_key(item), index)
            if first != index:
                return f"items must be unique, but [{index}] equals [{first}]"
        return None

    return check


_RULES: dict[str, Callable[[object], Check | None]] = {
    **{keyword: functools.partial(_bound, keyword) for keyword in _BOUNDS},
    **{keyword: functools.partial(_size, keyword) for keyword in _SIZES},
    "multipleOf": _multiple_of,
    "pattern": _pattern,
    "uniqueItems": _unique_items,
}

CONSTRAINTS = frozenset(_RULES)
"""The keywords whose constraint :func:`constraint_problem` checks."""


def constraint_checks(schema: Mapping[str, object]) -> list[Check]:
    """The compiled constraints of *schema*'s own node, in the schema's order, ``pattern`` last."""
    checks = (_RULES[key](schema[key]) for key in _in_order(schema))
    return [check for check in checks if check is not None]


def constraint_problem(value: object, schema: Mapping[str, object], path: str) -> str | None:
    """The first constraint of *schema*'s node that *value* breaks, as ``"<path>: <what>"``,
    ``pattern`` tried last (see :func:`_in_order`)."""
    for key, limit in schema.items():
        if key not in _RULES or key == "pattern":
            continue
        try:
            check = _built(key, type(limit).__name__, limit)
        except TypeError:  # an unhashable limit, in a schema no tool checked
            check = _RULES[key](limit)
        problem = None if check is None else check(value)
        if problem is not None:
            return f"{path}: {problem}"
    if "pattern" in schema:
        problem = _problem("pattern", schema["pattern"], value)
        if problem is not None:
            return f"{path}: {problem}"
    return None


def _problem(key: str, limit: object, value: object) -> str | None:
    try:
        check = _built(key, type(limit).__name__, limit)
    except TypeError:  # an unhashable limit, in a schema no tool checked
        check = _RULES[key](limit)
    return None if check is None else check(value)


def _in_order(schema: Mapping[str, object]) -> list[str]:
    """The node's constraint keywords, ``pattern`` moved last.

    Python's ``re`` backtracks: a pattern such as ``^(a+)+$`` takes time
    exponential in the text's length. Tried after ``maxLength``, it never
    runs on a text longer than the schema allows, whatever the keys' order.
    """
    keys = [key for key in schema if key in _RULES and key != "pattern"]
    if "pattern" in schema:
        keys.append("pattern")
    return keys


# The full validator runs on every call of a tool whose schema leaves the fast path
# (``oneOf``, ``not``): its checks are built once, not per node per call. The type is
# in the key: 1, 1.0 and True hash alike, but a message shows the limit as written.
@functools.lru_cache(maxsize=1024)
def _built(key: str, _kind: str, limit: object) -> Check | None:
    return _RULES[key](limit)


# -- references -------------------------------------------------------------------


def resolve_ref(root: Mapping[str, object], ref: object) -> object:
    """The schema a local ``$ref`` (``#``, ``#/$defs/Name``, any JSON pointer) points to, or ``None``."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    tokens = pointer_tokens(ref)
    if tokens is None:
        return None  # a named anchor: not supported
    node: object = root
    for token in tokens:
        node = _step(node, token)
    return node


def pointer_tokens(ref: str) -> list[str] | None:
    """The JSON pointer tokens of a local ``#...`` reference, unescaped; ``None`` for an anchor."""
    pointer = unquote(ref[1:])
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        return None
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _step(node: object, token: str) -> object:
    if isinstance(node, Mapping):
        return node.get(token)
    if is_array(node) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    return None
