"""The constraint keywords agree with independent oracles, and the fast path stays sound
for schemas that use them (R9.3, R9.6, R9.7).
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import assume, given

from retinue._lossless import freeze_json
from retinue.tools import Tool
from retinue.tools._validate import compile_acceptor, validate

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False)
    | st.sampled_from(["", "a", "b", "ab", "a1"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)

TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]
REFS = ["#/$defs/A", "#/$defs/B", "#"]


def _leaves() -> st.SearchStrategy[dict[str, Any]]:
    count = st.integers(0, 3)
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(TYPES)
            | st.lists(st.sampled_from(TYPES), min_size=1, max_size=2, unique=True),
            "enum": st.lists(json_values, max_size=2),
            "const": json_values,
            "minimum": st.integers(-2, 2),
            "maximum": st.floats(-2, 2, allow_nan=False),
            "exclusiveMinimum": st.integers(-2, 2),
            "exclusiveMaximum": st.integers(-2, 2),
            "multipleOf": st.sampled_from([1, 2, 0.5]),
            "minLength": count,
            "maxLength": count,
            "pattern": st.sampled_from(["^a", "b$", "[0-9]"]),
            "minItems": count,
            "maxItems": count,
            "uniqueItems": st.booleans(),
            "minProperties": count,
            "maxProperties": count,
            "$ref": st.sampled_from(REFS),
            "description": st.just("ignored"),
        },
    )


def _nest(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from(["a", "b", "c"])
    members = st.lists(inner, min_size=1, max_size=2)
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(TYPES),
            "items": inner,
            "prefixItems": members,
            "properties": st.dictionaries(names, inner, max_size=3),
            "required": st.lists(names, max_size=2, unique=True),
            "additionalProperties": inner,
            "propertyNames": st.sampled_from([{"maxLength": 1}, {"enum": ["a", "b"]}, False]),
            "allOf": members,
            "anyOf": members,
            "oneOf": members,
            "not": inner,
        },
    )


schemas = st.recursive(_leaves() | st.booleans(), _nest, max_leaves=6)


def _root(schema: Any, first: Any, second: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"v": schema},
        "$defs": {"A": first, "B": second},
    }


def _built(root: dict[str, Any]) -> Tool:
    try:
        return Tool("probe", "", root, lambda **_: None)
    except ValueError as exc:
        # A generated reference loop that never descends into a value is refused: skip it.
        assume("would never end" not in str(exc))
        raise


@given(schemas, schemas, schemas, json_values)
def test_the_fast_path_only_accepts_what_validate_accepts(
    schema: Any, first: Any, second: Any, raw: object
) -> None:
    """R9.6: with constraints, unions and references the acceptor confirms only valid values,
    and a tool's check reports exactly the reference validator's problem.
    """
    root = freeze_json(_root(schema, first, second))
    assert isinstance(root, dict)
    probe = _built(root)
    value = freeze_json({"v": raw})
    verdict = validate(value, root)
    if compile_acceptor(root)(value):
        assert verdict is None
    assert probe.check_arguments(value) == verdict


def _check(schema: dict[str, Any], value: object) -> str | None:
    tool = Tool("probe", "", {"type": "object", "properties": {"v": schema}}, lambda **_: None)
    return tool.check_arguments(freeze_json({"v": value}))


numbers = st.integers(-10, 10) | st.floats(-10, 10, allow_nan=False)


@given(numbers, st.integers(-5, 5), st.integers(-5, 5), st.booleans(), st.booleans())
def test_number_bounds_match_their_comparisons(
    value: float, low: int, high: int, exclusive_low: bool, exclusive_high: bool
) -> None:
    """R9.3: ``minimum``/``maximum`` and their exclusive forms are plain comparisons."""
    schema = {
        "exclusiveMinimum" if exclusive_low else "minimum": low,
        "exclusiveMaximum" if exclusive_high else "maximum": high,
    }
    above = value > low if exclusive_low else value >= low
    below = value < high if exclusive_high else value <= high
    assert (_check(schema, value) is None) is (above and below)


@given(st.integers(-50, 50), st.integers(0, 3), st.integers(0, 3))
def test_multiple_of_is_exact_in_decimal(digits: int, scale: int, step_scale: int) -> None:
    """R9.3: ``multipleOf`` reads numbers as the JSON text does: 0.3 is a multiple of 0.1."""
    value = float(f"{digits}e-{scale}")
    step = float(f"1e-{step_scale}")
    # digits * 10**-scale is a multiple of 10**-step_scale exactly when this holds:
    expected = scale <= step_scale or digits % 10 ** (scale - step_scale) == 0
    assert (_check({"multipleOf": step}, value) is None) is expected


@given(st.text(max_size=6), st.integers(0, 6), st.integers(0, 6))
def test_string_lengths_count_code_points(text: str, low: int, high: int) -> None:
    """R9.3: ``minLength``/``maxLength`` count code points (an astral character is one)."""
    count = len(list(text))
    expected = low <= count <= high
    assert (_check({"minLength": low, "maxLength": high}, text) is None) is expected


def _json_equal(left: object, right: object) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


@given(st.lists(json_values, max_size=5))
def test_unique_items_is_pairwise_json_inequality(items: list[object]) -> None:
    """R9.3: ``uniqueItems`` holds when no two items are JSON-equal (1 == 1.0, true != 1)."""
    expected = not any(_json_equal(items[i], items[j]) for i in range(len(items)) for j in range(i))
    assert (_check({"uniqueItems": True}, items) is None) is expected
