"""The constraints of a schema node as the shared JSON Schema reader compiles them."""

from __future__ import annotations

import pytest

from retinue._jsonschema import constraint_checks, constraint_problem


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"exclusiveMinimum": True}, 0.5),
        ({"exclusiveMaximum": False}, 3),
        ({"maximum": True}, 5),
        ({"minLength": True}, ""),
        ({"maxLength": "1"}, "ab"),
        ({"maxItems": 1.5}, [1, 2]),
        ({"pattern": 5}, "ab"),
    ],
    ids=[
        "boolean exclusiveMinimum",
        "boolean exclusiveMaximum",
        "boolean maximum",
        "boolean minLength",
        "text maxLength",
        "fractional maxItems",
        "number pattern",
    ],
)
def test_a_malformed_constraint_constrains_nothing(
    schema: dict[str, object], value: object
) -> None:
    """A bound that is no number (a boolean ``exclusiveMinimum`` of draft 4 and OpenAPI 3.0 among
    them), a size that is no whole number and a pattern that is no string constrain nothing, as the
    reader promises of a malformed keyword: a boolean is not read as 1 or 0, a text as the number it
    spells, nor a number as the pattern its digits spell."""
    assert constraint_problem(value, schema, "x") is None
    assert constraint_checks(schema) == []


def test_a_draft_4_exclusive_bound_leaves_the_bound_beside_it_as_it_is() -> None:
    """``"exclusiveMinimum": true`` beside a ``minimum`` (draft 4, OpenAPI 3.0) is no number: the
    ``minimum`` alone is checked, and 0.5 is not refused as not above ``true``."""
    schema = {"minimum": 0, "exclusiveMinimum": True}
    assert constraint_problem(0.5, schema, "x") is None
    assert constraint_problem(-1, schema, "x") == "x: must be >= 0, got -1"


def test_well_formed_constraints_still_constrain() -> None:
    """The same keywords written as JSON Schema has them are each checked."""
    assert constraint_problem(0, {"exclusiveMinimum": 0}, "x") == "x: must be > 0, got 0"
    assert constraint_problem("ab", {"maxLength": 1}, "x") == (
        "x: must have at most 1 character, got 2"
    )
    assert constraint_problem([1, 2], {"maxItems": 1.0}, "x") == (
        "x: must have at most 1 item, got 2"
    )
    assert constraint_problem("ab", {"pattern": "^a$"}, "x") == 'x: must match the pattern "^a$"'
