"""Argument validation against a tool's JSON schema, before the body runs (R9.3 stage 3, R9.6)."""

from __future__ import annotations

from typing import Literal

from hypothesis import given

from retinue._lossless import FrozenDict, freeze_json
from retinue.tools import tool
from retinue.tools._validate import validate
from tests.strategies import json_values


@tool
def book(
    city: str,
    nights: int,
    guests: list[dict[str, int]],
    room: Literal["single", "double"] = "single",
    budget: float | None = None,
    flexible: bool = False,
) -> str:
    """Book a room."""
    return city


SCHEMA: FrozenDict = book.parameters
VALID = {"city": "Oslo", "nights": 2, "guests": [{"age": 30}]}


def check(arguments: object) -> str | None:
    return validate(freeze_json(arguments), SCHEMA)


def test_validate_accepts_conforming_arguments() -> None:
    """R9.3: arguments matching the generated schema pass (optional fields may be absent)."""
    assert check(VALID) is None
    assert check({**VALID, "room": "double", "budget": None, "flexible": True}) is None
    assert check({**VALID, "budget": 120}) is None


def test_validate_reports_a_type_mismatch_with_its_path() -> None:
    """R9.3: a wrong type is reported as ``<path>: expected <type>, got <type>``."""
    assert check({**VALID, "city": 3}) == "city: expected string, got integer"
    assert check({**VALID, "budget": "cheap"}) == "budget: expected number or null, got string"


def test_validate_reports_nested_array_and_object_paths() -> None:
    """R9.3: nested failures name the array index and object key."""
    bad = {**VALID, "guests": [{"age": 30}, {"age": "old"}]}
    assert check(bad) == "guests[1].age: expected integer, got string"
    assert check({**VALID, "guests": {"age": 1}}) == "guests: expected array, got object"


def test_validate_reports_a_missing_required_property() -> None:
    """R9.3: a missing required argument is reported by name."""
    assert check({"city": "Oslo", "guests": []}) == "nights: missing required property"


def test_validate_rejects_unexpected_properties() -> None:
    """R9.3: ``additionalProperties: false`` refuses arguments the tool does not declare."""
    assert check({**VALID, "pets": 2}) == "pets: unexpected property"


def test_validate_reports_a_value_outside_the_enum() -> None:
    """R9.3: a Literal parameter accepts only its listed values."""
    assert check({**VALID, "room": "suite"}) == 'room: must be one of "single", "double"'


def test_validate_distinguishes_booleans_from_numbers() -> None:
    """R9.3: JSON booleans are not integers, and an integer-valued float is an integer."""
    assert check({**VALID, "nights": True}) == "nights: expected integer, got boolean"
    assert check({**VALID, "nights": 2.0}) is None
    assert check({**VALID, "nights": 2.5}) == "nights: expected integer, got number"
    assert check({**VALID, "flexible": 1}) == "flexible: expected boolean, got integer"


def test_validate_rejects_raw_string_arguments() -> None:
    """R9.6: invalid JSON from the model arrives as the raw string and fails validation."""
    assert validate('{"city": "Oslo"', SCHEMA) == "arguments: expected object, got string"


def test_validate_reports_the_matching_branch_of_an_any_of() -> None:
    """R9.3: for a union, the complaint of the branch whose type matched is reported."""
    schema = freeze_json(
        {
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}},
                {"type": "string", "enum": ["x"]},
            ]
        }
    )
    assert isinstance(schema, FrozenDict)
    assert validate({"a": "1"}, schema) == "a: expected integer, got string"
    assert validate("y", schema) == 'arguments: must be one of "x"'
    assert validate(3, schema) == "arguments: expected object or string, got integer"
    assert validate("x", schema) is None


def test_validate_lists_every_choice_of_a_union_of_choice_sets() -> None:
    """R9.3: a value of the right type outside every choice set of a union (``Literal["auto"]
    | Unit``) is told all the choices, not only those of the first set.
    """
    schema = freeze_json(
        {
            "anyOf": [
                {"type": "string", "enum": ["auto"]},
                {"type": "string", "enum": ["celsius", "fahrenheit", "auto"]},
                {"type": "string", "const": "kelvin"},
                {"type": "integer", "enum": [1, 2]},
            ]
        }
    )
    assert isinstance(schema, FrozenDict)
    assert validate("rankine", schema) == (
        'arguments: must be one of "auto", "celsius", "fahrenheit", "kelvin"'
    )
    assert validate(3, schema) == "arguments: must be one of 1, 2"
    assert validate(True, schema) == "arguments: expected string or integer, got boolean"


@given(json_values)
def test_validate_never_raises_for_any_json_value(value: object) -> None:
    """R9.2: validation turns any argument value into a verdict, never an exception."""
    verdict = validate(freeze_json(value), SCHEMA)
    assert verdict is None or verdict.count(": ") >= 1
