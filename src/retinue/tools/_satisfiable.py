"""Whether a schema node's own bounds leave any value of the JSON types they bound.

A ``minimum`` above its ``maximum``, a ``minLength`` above its ``maxLength``, an
``enum`` whose every value a bound refuses: a tool carrying such a node is
refused every argument there, on every call. Only what one node says of itself
is read (its ``allOf``, ``$ref`` or ``not`` are not): a node reported here has
no value of the kind its bound is about, whatever those say.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from retinue._jsonschema import (
    constraint_problem,
    decimal,
    is_number,
    is_type,
    schema_list,
    type_names as declared_types,
)

from ._annotations import SIZE_KEYWORDS

__all__ = ["unsatisfiable"]

_NUMBERS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf")

# A bound: its value read as the JSON text writes it, and whether it is exclusive.
_Bound = tuple[Fraction, bool]


def unsatisfiable(node: Mapping[str, object]) -> str | None:
    """Why *node*'s own keywords leave no value of a type they bound, or ``None``.

    An ``enum`` or ``const`` whose every value of the node's types but ``null``
    its bounds refuse; no number (integer, for an integer type alone) within its
    numeric bounds and a multiple of its ``multipleOf``; a least size above the
    most; more ``required`` names than ``maxProperties``, or a ``minProperties``
    beyond the properties a closed object may have.
    """
    if "enum" in node or "const" in node:
        return _no_choice(node)
    kinds = _kinds(node)
    return _no_number(node, kinds) or _no_size(node, kinds) or _no_object(node, kinds)


def _kinds(node: Mapping[str, object]) -> frozenset[str] | None:
    """The JSON types *node* allows, its ``anyOf`` members' if it says none; ``None``: any."""
    names = declared_types(node)
    if names is not None:
        return frozenset(names)
    kinds: set[str] = set()
    for member in schema_list(node.get("anyOf")) or (None,):
        member_names = declared_types(member) if isinstance(member, Mapping) else None
        if member_names is None:
            return None
        kinds.update(member_names)
    return frozenset(kinds)


def _no_choice(node: Mapping[str, object]) -> str | None:
    keyword = "enum" if "enum" in node else "const"
    values = schema_list(node["enum"]) if keyword == "enum" else (node["const"],)
    names = declared_types(node)
    # Values of no type the node allows, and null, are as written: no bound took them away.
    bounded = [
        value
        for value in values
        if value is not None and (names is None or any(is_type(value, n) for n in names))
    ]
    problems: list[str] = []
    for value in bounded:
        problem = constraint_problem(value, node, repr(value))
        if problem is None:
            return None
        problems.append(problem)
    if not problems:
        return None
    return f"every value of its {keyword} breaks one ({'; '.join(problems)})"


def _no_number(node: Mapping[str, object], kinds: frozenset[str] | None) -> str | None:
    if kinds is not None and not {"number", "integer"} & kinds:
        return None
    try:
        low = _side(node, "minimum", "exclusiveMinimum", lower=True)
        high = _side(node, "maximum", "exclusiveMaximum", lower=False)
        step = node.get("multipleOf")
        unit = decimal(step) if is_number(step) and step > 0 else None
    except ValueError:  # an infinite or NaN bound: not JSON, refused where it is frozen
        return None
    if low is None or high is None:
        return None  # one side open: numbers without end
    if kinds is not None and "number" not in kinds:
        # The integers that are multiples of p/q are those of p.
        unit = Fraction(1) if unit is None else Fraction(unit.numerator)
    if unit is None:
        empty = low[0] > high[0] or (low[0] == high[0] and (low[1] or high[1]))
    else:
        first = math.floor(low[0] / unit) + 1 if low[1] else math.ceil(low[0] / unit)
        last = math.ceil(high[0] / unit) - 1 if high[1] else math.floor(high[0] / unit)
        empty = first > last
    if not empty:
        return None
    what = "integer" if kinds is not None and "number" not in kinds else "number"
    written = ", ".join(f"{keyword} {node[keyword]!r}" for keyword in _NUMBERS if keyword in node)
    return f"no {what} meets {written}"


def _side(
    node: Mapping[str, object], inclusive: str, exclusive: str, *, lower: bool
) -> _Bound | None:
    """The tighter of *node*'s inclusive and exclusive bound on one side, if it has either."""
    best: _Bound | None = None
    for keyword in (inclusive, exclusive):
        limit = node.get(keyword)
        if not is_number(limit):
            continue
        bound = (decimal(limit), keyword == exclusive)
        if best is None or _tighter(bound, best, lower=lower):
            best = bound
    return best


def _tighter(bound: _Bound, other: _Bound, *, lower: bool) -> bool:
    if bound[0] == other[0]:
        return bound[1]  # at the same value, the exclusive one
    return (bound[0] > other[0]) is lower


def _no_size(node: Mapping[str, object], kinds: frozenset[str] | None) -> str | None:
    for kind, (least, most) in SIZE_KEYWORDS.items():
        if kinds is not None and kind not in kinds:
            continue
        low, high = node.get(least), node.get(most)
        if is_number(low) and is_number(high) and low > high:
            return f"{least} {low!r} is above {most} {high!r}: no {kind} has such a size"
    return None


def _no_object(node: Mapping[str, object], kinds: frozenset[str] | None) -> str | None:
    if kinds is not None and "object" not in kinds:
        return None
    most, least = node.get("maxProperties"), node.get("minProperties")
    required = {name for name in schema_list(node.get("required")) if isinstance(name, str)}
    if is_number(most) and len(required) > most:
        return f"it requires {len(required)} properties, above maxProperties {most!r}"
    properties = node.get("properties")
    closed = node.get("additionalProperties") is False
    if closed and isinstance(properties, Mapping) and is_number(least) and least > len(properties):
        return (
            f"minProperties {least!r} is above the {len(properties)} properties it allows "
            "(additionalProperties is false)"
        )
    return None
