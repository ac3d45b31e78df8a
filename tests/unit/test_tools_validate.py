"""Argument validation against a tool's JSON schema, before the body runs (R9.3 stage 3, R9.6).

Every example runs twice: through the reference ``validate`` and through the compiled
fast path tools check with (``make_validator``), which must give the same verdicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Literal

import pytest
from hypothesis import given

from retinue._lossless import FrozenDict, freeze_json
from retinue.tools import Tool, tool
from retinue.tools._refusals import LISTED_CHOICES
from retinue.tools._validate import MAX_PROBLEMS, compile_acceptor, validate
from tests.strategies import json_values

Validator = Callable[[object, Mapping[str, object]], str | None]
Check = Callable[[object], str | None]


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


def _compiled(value: object, schema: Mapping[str, object]) -> str | None:
    """``make_validator``'s check for any root: the acceptor, then ``validate`` if it does not accept."""
    return None if compile_acceptor(schema)(value) else validate(value, schema)


@pytest.fixture(params=["reference", "compiled"])
def path(request: pytest.FixtureRequest) -> str:
    """Each example runs through the reference validator and through the compiled fast path."""
    return str(request.param)


@pytest.fixture
def validator(path: str) -> Validator:
    """``validate``, or the fast path a tool checks its arguments with."""
    return _compiled if path == "compiled" else validate


@pytest.fixture
def check(path: str) -> Check:
    """Check arguments of ``book``: by ``validate``, or by the tool's own ``check_arguments``."""
    run = book.check_arguments if path == "compiled" else lambda value: validate(value, SCHEMA)
    return lambda arguments: run(freeze_json(arguments))


def test_validate_accepts_conforming_arguments(check: Check) -> None:
    """R9.3: arguments matching the generated schema pass (optional fields may be absent)."""
    assert check(VALID) is None
    assert check({**VALID, "room": "double", "budget": None, "flexible": True}) is None
    assert check({**VALID, "budget": 120}) is None


def test_validate_reports_a_type_mismatch_with_its_path(check: Check) -> None:
    """R9.3: a wrong type is reported as ``<path>: expected <type>, got <type>``."""
    assert check({**VALID, "city": 3}) == "city: expected string, got integer"
    assert check({**VALID, "budget": "cheap"}) == "budget: expected number or null, got string"


def test_validate_reports_nested_array_and_object_paths(check: Check) -> None:
    """R9.3: nested failures name the array index and object key."""
    bad = {**VALID, "guests": [{"age": 30}, {"age": "old"}]}
    assert check(bad) == "guests[1].age: expected integer, got string"
    assert check({**VALID, "guests": {"age": 1}}) == "guests: expected array, got object"


def test_validate_reports_a_missing_required_property(check: Check) -> None:
    """R9.3: a missing required argument is reported by name."""
    assert check({"city": "Oslo", "guests": []}) == "nights: missing required property"


def test_a_tool_names_every_mistake_of_its_arguments_up_to_a_bound() -> None:
    """R9.3: a tool's check names each of its arguments' own problems, missing ones
    first, so a model fixes them in one more call, not one call per mistake; past
    ``MAX_PROBLEMS`` it says there are more. The reference ``validate`` names the first."""
    wrong = {"city": 3, "guests": [{"age": "old"}], "room": "suite", "pets": 1}
    problems = [
        "nights: missing required property",
        "city: expected string, got integer",
        "guests[0].age: expected integer, got string",
        'room: must be one of "single", "double"',
        "pets: unexpected property",
    ]
    assert book.check_arguments(freeze_json(wrong)) == "; ".join(problems)
    assert validate(freeze_json(wrong), SCHEMA) == problems[0]
    more = freeze_json({**wrong, "budget": "cheap", "flexible": 0})
    assert book.check_arguments(more) == "; ".join(problems[:MAX_PROBLEMS]) + "; and more"


def test_a_key_with_a_refused_name_is_named_once_among_the_problems() -> None:
    """R9.3: a key that ``propertyNames`` refuses is not listed again as unexpected: one
    problem per key, the others still listed."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "propertyNames": {"pattern": "^[a-z]+$"},
        "additionalProperties": False,
    }
    named = Tool("named", "Named.", schema, lambda **_: "")
    assert named.check_arguments(freeze_json({"Z": 1, "a": "x", "b": 2})) == (
        'Z: property name must match the pattern "^[a-z]+$"; '
        "a: expected integer, got string; b: unexpected property"
    )


def test_validate_rejects_unexpected_properties(check: Check) -> None:
    """R9.3: ``additionalProperties: false`` refuses arguments the tool does not declare."""
    assert check({**VALID, "pets": 2}) == "pets: unexpected property"


def test_validate_reports_a_value_outside_the_enum(check: Check) -> None:
    """R9.3: a Literal parameter accepts only its listed values."""
    assert check({**VALID, "room": "suite"}) == 'room: must be one of "single", "double"'


def test_validate_distinguishes_booleans_from_numbers(check: Check) -> None:
    """R9.3: JSON booleans are not integers, and an integer-valued float is an integer."""
    assert check({**VALID, "nights": True}) == "nights: expected integer, got boolean"
    assert check({**VALID, "nights": 2.0}) is None
    assert check({**VALID, "nights": 2.5}) == "nights: expected integer, got number"
    assert check({**VALID, "flexible": 1}) == "flexible: expected boolean, got integer"


def test_validate_rejects_raw_string_arguments(check: Check) -> None:
    """R9.6: invalid JSON from the model arrives as the raw string and fails validation."""
    assert check('{"city": "Oslo"') == "arguments: expected object, got string"


def test_validate_reports_the_matching_branch_of_an_any_of(validator: Validator) -> None:
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
    assert validator({"a": "1"}, schema) == "a: expected integer, got string"
    assert validator("y", schema) == 'arguments: must be one of "x"'
    assert validator(3, schema) == "arguments: expected object or string, got integer"
    assert validator("x", schema) is None


def test_validate_lists_every_choice_of_a_union_of_choice_sets(validator: Validator) -> None:
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
    assert validator("rankine", schema) == (
        'arguments: must be one of "auto", "celsius", "fahrenheit", "kelvin"'
    )
    assert validator(3, schema) == "arguments: must be one of 1, 2"
    assert validator(True, schema) == "arguments: expected string or integer, got boolean"


@given(json_values)
def test_validate_never_raises_for_any_json_value(value: object) -> None:
    """R9.2: validation turns any argument value into a verdict, never an exception."""
    verdict = validate(freeze_json(value), SCHEMA)
    assert verdict is None or verdict.count(": ") >= 1


def test_validate_shows_the_choices_it_names_as_json(validator: Validator) -> None:
    """R9.3: a refused value is told the allowed ones as the JSON it writes arguments in:
    an array in brackets and null as null, not as a Python tuple holding None, and a string
    with its quotes escaped."""
    schema = freeze_json(
        {
            "type": "object",
            "properties": {
                "shape": {"const": {"sides": [3, None]}},
                "mode": {"enum": [[1, 2], {"on": True}, None, 'say "hi"']},
            },
        }
    )
    assert isinstance(schema, FrozenDict)
    assert validator({"shape": {}}, schema) == 'shape: must be {"sides": [3, null]}'
    assert validator({"mode": 3}, schema) == (
        'mode: must be one of [1, 2], {"on": true}, null, "say \\"hi\\""'
    )


def test_a_refusal_lists_many_choices_up_to_a_bound() -> None:
    """R9.3: a value outside thousands of choices (one enum, or a union of several) is
    refused naming the first ``LISTED_CHOICES`` of them and how many there are, all of them
    in the schema the model was given, not each one again in every refusal."""
    first = [f"a{i}" for i in range(3000)]
    second = [f"b{i}" for i in range(3000)]
    listed = ", ".join(f'"{choice}"' for choice in first[:LISTED_CHOICES])
    one = {"type": "object", "properties": {"x": {"enum": first}}}
    union = {"type": "object", "properties": {"x": {"anyOf": [{"enum": first}, {"enum": second}]}}}
    for schema, count in ((one, 3000), (union, 6000)):
        refusal = Tool("t", "T.", schema, lambda **_: "").check_arguments(freeze_json({"x": "z"}))
        assert (
            refusal
            == f"x: must be one of {listed}, ... ({count} choices, all listed in the schema)"
        )


@dataclasses.dataclass
class _Cat:
    kind: Literal["cat"]
    lives: int = 9


@dataclasses.dataclass
class _Dog:
    kind: Literal["dog"]
    good: bool = True


@tool
def adopt(pet: _Cat | _Dog) -> str:
    """Adopt a pet."""
    return str(pet)


def test_a_union_of_records_tagged_by_a_literal_reports_the_tagged_member(
    validator: Validator,
) -> None:
    """R9.3: of a union of records told apart by a ``Literal`` field (an ``enum`` of one
    value, as ``@tool`` writes it), the member whose tag the value carries gives the
    complaint, as with a ``const`` tag, not the first member, which says its own tag is wrong.
    """
    schema = adopt.parameters
    assert validator({"pet": {"kind": "dog", "good": 1}}, schema) == (
        "pet.good: expected boolean, got integer"
    )
    assert validator({"pet": {"kind": "dog", "lives": 3}}, schema) == (
        "pet.lives: unexpected property"
    )
    assert validator({"pet": {"kind": "cat", "lives": "9"}}, schema) == (
        "pet.lives: expected integer, got string"
    )


def test_a_record_whose_tag_no_member_of_its_union_has_is_told_every_tag(
    validator: Validator,
) -> None:
    """R9.3: a record of a union told apart by a tag field, carrying a tag no member has, is
    refused at that field listing every member's tag (a ``Literal`` or a ``const``), not
    with the first member's complaint: its own tag alone, or a field the value lacks.
    """
    assert validator({"pet": {"kind": "bird"}}, adopt.parameters) == (
        'pet.kind: must be one of "cat", "dog"'
    )
    tagged = freeze_json(
        {
            "type": "object",
            "properties": {
                "x": {
                    "anyOf": [
                        {"$ref": "#/$defs/A"},
                        {
                            "type": "object",
                            "properties": {"kind": {"const": "b"}, "s": {"type": "string"}},
                            "required": ["kind", "s"],
                        },
                    ]
                }
            },
            "$defs": {
                "A": {
                    "type": "object",
                    "properties": {"kind": {"const": "a"}, "n": {"type": "integer"}},
                    "required": ["kind", "n"],
                }
            },
        }
    )
    assert isinstance(tagged, FrozenDict)
    assert validator({"x": {"kind": "c"}}, tagged) == 'x.kind: must be one of "a", "b"'
    assert validator({"x": {"kind": "b"}}, tagged) == "x.s: missing required property"


def test_a_record_carrying_one_members_tag_gets_that_members_complaint(
    validator: Validator,
) -> None:
    """R9.3: a record of a union told apart by tags, carrying one member's tag and a second
    tag field that matches no member, is told what that member wants of the second field,
    not every member's value for it (a cat told it may say "woof")."""

    def pet(kind: str, sound: str) -> dict[str, object]:
        return {
            "type": "object",
            "properties": {"kind": {"const": kind}, "sound": {"const": sound}},
            "required": ["kind", "sound"],
        }

    pets = {"anyOf": [pet("cat", "meow"), pet("dog", "woof")]}
    schema = freeze_json({"type": "object", "properties": {"pet": pets}})
    assert isinstance(schema, FrozenDict)
    assert (
        validator({"pet": {"kind": "cat", "sound": "moo"}}, schema) == 'pet.sound: must be "meow"'
    )
    assert (
        validator({"pet": {"kind": "dog", "sound": "moo"}}, schema) == 'pet.sound: must be "woof"'
    )


def test_a_record_matching_several_members_tags_alike_is_told_each_of_their_values(
    validator: Validator,
) -> None:
    """R9.3: members sharing a tag (an event's type, a kind with several versions) tie on the
    value's tags: a second tag field matching none of them is told every tied member's value
    for it, not the first one's as if it were the only one."""

    def member(**tags: str) -> dict[str, object]:
        return {
            "type": "object",
            "properties": {name: {"const": tag} for name, tag in tags.items()},
            "required": list(tags),
        }

    events = [member(type="event", name=name) for name in ("start", "stop", "pause")]
    schema = freeze_json({"type": "object", "properties": {"x": {"anyOf": events}}})
    assert isinstance(schema, FrozenDict)
    assert validator({"x": {"type": "event", "name": "resume"}}, schema) == (
        'x.name: must be one of "start", "stop", "pause"'
    )
    kinds = [member(kind="cat", version="v1"), member(kind="cat", version="v2")]
    schema = freeze_json(
        {
            "type": "object",
            "properties": {"x": {"anyOf": [*kinds, member(kind="dog", version="v1")]}},
        }
    )
    assert isinstance(schema, FrozenDict)
    assert validator({"x": {"kind": "cat", "version": "v3"}}, schema) == (
        'x.version: must be one of "v1", "v2"'
    )


def test_a_record_matching_no_tag_of_the_one_member_of_its_type_is_told_the_tag(
    validator: Validator,
) -> None:
    """R9.3: ``Optional[Cat]`` (a tagged record or null) given a record with another tag is
    told the tag, ``must be "cat"``, not a field the record lacks, which the model would add
    only to be refused for the tag next."""
    cat = {
        "type": "object",
        "properties": {"pet_type": {"const": "cat"}, "meows": {"type": "integer"}},
        "required": ["pet_type", "meows"],
    }
    schema = freeze_json(
        {"type": "object", "properties": {"pet": {"anyOf": [cat, {"type": "null"}]}}}
    )
    assert isinstance(schema, FrozenDict)
    assert validator({"pet": {"pet_type": "dog"}}, schema) == 'pet.pet_type: must be "cat"'
