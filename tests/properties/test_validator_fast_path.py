"""The compiled argument acceptor agrees with the reference validator (R9.3, R9.6).

The acceptor is a fast path: it may only say "valid" where ``validate`` does;
``Tool.check_arguments`` must return exactly what ``validate`` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
from hypothesis import assume, example, given

from retinue._lossless import freeze_json
from retinue.tools import Tool
from retinue.tools._validate import compile_acceptor, validate

TYPES = ["string", "integer", "number", "boolean", "null", "array", "object", "other"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False)
    | st.sampled_from(["", "a", "b"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(TYPES)
            | st.lists(st.sampled_from(TYPES), max_size=2, unique=True),
            "enum": st.lists(json_values, max_size=2),
            "description": st.just("ignored"),
        },
    )

    def nest(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(TYPES),
                "items": inner,
                "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
                "additionalProperties": st.booleans() | inner,
                "anyOf": st.lists(inner, min_size=1, max_size=2),
            },
        )

    return st.recursive(leaf, nest, max_leaves=6)


# JSON booleans are not numbers, though Python's bool is an int: pairings of the three,
# in a type, a list of types, an enum, a union and an array's items, are always tried.
BOOLEANS_AND_NUMBERS: list[tuple[dict[str, Any], object]] = [
    ({"type": "integer"}, True),
    ({"type": "integer"}, False),
    ({"type": "number"}, True),
    ({"type": "number"}, False),
    ({"type": "boolean"}, 1),
    ({"type": "boolean"}, 0),
    ({"type": "boolean"}, 1.0),
    ({"type": "integer"}, 1.0),
    ({"type": "integer"}, 2.5),
    ({"type": "number"}, 1),
    ({"type": ["integer", "null"]}, True),
    ({"type": ["number", "string"]}, False),
    ({"enum": [1]}, True),
    ({"enum": [True]}, 1),
    ({"enum": [0]}, False),
    ({"enum": [1]}, 1.0),
    ({"type": "array", "items": {"type": "integer"}}, [1, True]),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, True),
]


def _booleans_and_numbers(test: Callable[..., None]) -> Callable[..., None]:
    """Add every pair of ``BOOLEANS_AND_NUMBERS`` to *test* as an explicit example."""
    for schema, raw in BOOLEANS_AND_NUMBERS:
        test = example(schema, raw)(test)
    return test


@given(_schemas(), json_values)
@_booleans_and_numbers
def test_acceptor_never_accepts_what_validate_rejects(schema: dict[str, Any], raw: object) -> None:
    """R9.6: the fast path only confirms values the reference validator accepts."""
    frozen_schema = freeze_json(schema)
    value = freeze_json(raw)
    assert isinstance(frozen_schema, dict)
    if compile_acceptor(frozen_schema)(value):
        assert validate(value, frozen_schema) is None


@given(_schemas(), json_values)
@_booleans_and_numbers
def test_check_arguments_equals_validate(schema: dict[str, Any], raw: object) -> None:
    """R9.3: a tool's compiled check reports exactly the reference validator's problem."""
    # A tool's root is an object; an unknown type name ("other") or an empty list of
    # types is refused when the tool is built.
    root = freeze_json({"type": "object", "properties": {"v": schema}})
    assert isinstance(root, dict)
    try:
        probe = Tool(name="probe", description="", parameters=root, fn=lambda: None)
    except ValueError as exc:
        # Only those two refusals: any other would be a valid schema refused, a failure.
        assume("unknown type" not in str(exc) and "at least one type" not in str(exc))
        raise
    value = freeze_json({"v": raw})
    assert probe.check_arguments(value) == validate(value, root)


def test_acceptor_confirms_plain_tool_arguments() -> None:
    """The fast path covers the shapes tools declare (objects of typed fields)."""
    schema = freeze_json(
        {
            "type": "object",
            "properties": {"key": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["key"],
            "additionalProperties": False,
        }
    )
    assert isinstance(schema, dict)
    accept = compile_acceptor(schema)
    assert accept(freeze_json({"key": "k", "n": 2}))
    assert not accept(freeze_json({"n": 2}))
    assert not accept(freeze_json({"key": "k", "extra": 1}))
    assert not accept(freeze_json({"key": 3}))
