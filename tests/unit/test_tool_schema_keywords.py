"""A hand-written tool schema: each constraint is enforced on every call, a pydantic-written
schema among them (R9.3 stage 3, R9.7).
"""

from __future__ import annotations

import pytest

from retinue._lossless import freeze_json
from retinue.hooks import HookBus
from retinue.tools import Tool, ToolExecution, ToolRegistry
from tests.unit._schema_keywords_kit import check, holding

# What pydantic's ``model_json_schema()`` writes: ``$defs`` with a recursive model, a
# discriminated union, bounds, a pattern, a set (unique items), a fixed tuple
# (``prefixItems``), constrained dict keys (``propertyNames``) and annotations.
PYDANTIC_LIKE: dict[str, object] = {
    "$defs": {
        "Cat": {
            "properties": {
                "kind": {"const": "cat", "title": "Kind", "type": "string"},
                "lives": {"default": 9, "title": "Lives", "type": "integer"},
            },
            "required": ["kind"],
            "title": "Cat",
            "type": "object",
        },
        "Dog": {
            "properties": {
                "kind": {"const": "dog", "title": "Kind", "type": "string"},
                "good": {"default": True, "title": "Good", "type": "boolean"},
            },
            "required": ["kind"],
            "title": "Dog",
            "type": "object",
        },
        "Node": {
            "properties": {
                "name": {"title": "Name", "type": "string"},
                "children": {
                    "default": [],
                    "items": {"$ref": "#/$defs/Node"},
                    "title": "Children",
                    "type": "array",
                },
            },
            "required": ["name"],
            "title": "Node",
            "type": "object",
        },
        "Unit": {"enum": ["c", "f"], "title": "Unit", "type": "string"},
    },
    "description": "A forecast request.",
    "properties": {
        "unit": {"$ref": "#/$defs/Unit"},
        "days": {"description": "days", "maximum": 7, "minimum": 1, "type": "integer"},
        "temp": {"exclusiveMaximum": 1000, "exclusiveMinimum": -300, "multipleOf": 0.5},
        "city": {"maxLength": 10, "minLength": 1, "pattern": "^[A-Z]", "type": "string"},
        "tags": {"default": [], "items": {"type": "string"}, "type": "array", "uniqueItems": True},
        "pair": {
            "anyOf": [
                {
                    "maxItems": 2,
                    "minItems": 2,
                    "prefixItems": [{"type": "integer"}, {"type": "string"}],
                    "type": "array",
                },
                {"type": "null"},
            ],
            "default": None,
        },
        "when": {"anyOf": [{"format": "date-time", "type": "string"}, {"type": "null"}]},
        "tree": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}], "default": None},
        "pet": {
            "discriminator": {
                "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"},
                "propertyName": "kind",
            },
            "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
        },
        "scores": {
            "additionalProperties": {"type": "integer"},
            "propertyNames": {"enum": ["a", "b"]},
            "type": "object",
        },
        "legacy": {"deprecated": True, "examples": [1], "readOnly": True, "type": "integer"},
    },
    "required": ["unit", "days", "city"],
    "title": "Forecast",
    "type": "object",
}


GOOD = {
    "unit": "c",
    "days": 3,
    "temp": 20.5,
    "city": "Oslo",
    "tags": ["a", "b"],
    "pair": [1, "x"],
    "when": "2024-01-01T00:00:00Z",
    "tree": {"name": "root", "children": [{"name": "leaf", "children": []}]},
    "pet": {"kind": "dog", "good": True},
    "scores": {"a": 1},
    "legacy": 2,
}


def test_a_pydantic_schema_builds_and_accepts_conforming_arguments() -> None:
    """R9.7: ``$defs``/``$ref`` (recursive too), bounds, patterns, unions and annotations build."""
    assert check(PYDANTIC_LIKE, GOOD) is None
    assert check(PYDANTIC_LIKE, {**GOOD, "pair": None, "tree": None, "temp": 0}) is None


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("unit", "kelvin", 'unit: must be one of "c", "f"'),
        ("days", 0, "days: must be >= 1, got 0"),
        ("days", 8, "days: must be <= 7, got 8"),
        ("temp", -300, "temp: must be > -300, got -300"),
        ("temp", 1000.0, "temp: must be < 1000, got 1000.0"),
        ("temp", 20.25, "temp: must be a multiple of 0.5, got 20.25"),
        ("city", "", "city: must have at least 1 character, got 0"),
        ("city", "Reykjavik, IS", "city: must have at most 10 characters, got 13"),
        ("city", "oslo", 'city: must match the pattern "^[A-Z]"'),
        ("tags", ["a", "a"], "tags: items must be unique, but [1] equals [0]"),
        ("pair", [1, 2], "pair[1]: expected string, got integer"),
        ("pair", [1, "x", 3], "pair: must have at most 2 items, got 3"),
        ("when", 5, "when: expected string or null, got integer"),
        (
            "tree",
            {"name": "r", "children": [{}]},
            "tree.children[0].name: missing required property",
        ),
        ("tree", 5, "tree: expected object or null, got integer"),
        ("pet", {"kind": "dog", "good": 1}, "pet.good: expected boolean, got integer"),
        ("pet", {"kind": "cat", "lives": "nine"}, "pet.lives: expected integer, got string"),
        ("scores", {"c": 1}, 'scores.c: property name must be one of "a", "b"'),
        ("scores", {"a": "x"}, "scores.a: expected integer, got string"),
    ],
)
def test_a_pydantic_schema_refuses_what_it_forbids_naming_the_path(
    name: str, value: object, problem: str
) -> None:
    """R9.3: every constraint of the schema is enforced, reported at the value that broke it."""
    assert check(PYDANTIC_LIKE, {**GOOD, name: value}) == problem


async def test_a_value_the_schema_forbids_never_reaches_the_body() -> None:
    """R9.3: a hand-written schema's bounds stop the call before the body, as a coded error."""
    ran: list[object] = []

    def body(**arguments: object) -> str:
        ran.append(arguments)
        return "ran"

    forecast = Tool(
        "forecast",
        "Forecast.",
        holding("days", {"type": "integer", "minimum": 1, "maximum": 7}),
        body,
    )
    registry = ToolRegistry(HookBus(), [forecast])
    result = await registry.execute(ToolExecution("c1", "forecast", freeze_json({"days": 0})))
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "INVALID_ARGUMENTS"
    assert "days: must be >= 1, got 0" in str(result.content)
    assert ran == []
    allowed = await registry.execute(ToolExecution("c2", "forecast", freeze_json({"days": 7})))
    assert not allowed.is_error
    assert ran == [{"days": 7}]


@pytest.mark.parametrize(
    ("schema", "good", "bad", "problem"),
    [
        ({"minimum": 1.5}, 1.5, 1, "x: must be >= 1.5, got 1"),
        ({"exclusiveMinimum": 0}, 0.001, 0, "x: must be > 0, got 0"),
        ({"exclusiveMaximum": 0}, -1, 0.0, "x: must be < 0, got 0.0"),
        ({"multipleOf": 0.1}, 0.3, 0.35, "x: must be a multiple of 0.1, got 0.35"),
        ({"multipleOf": 3}, 9.0, 10, "x: must be a multiple of 3, got 10"),
        # code points, not UTF-16 units: an emoji is one character
        ({"maxLength": 1}, "😀", "ab", "x: must have at most 1 character, got 2"),
        ({"minLength": 2}, "éé", "é", "x: must have at least 2 characters, got 1"),
        # re.search: a pattern is not anchored
        ({"pattern": "[0-9]"}, "ab1", "abc", 'x: must match the pattern "[0-9]"'),
        ({"minItems": 1}, [0], [], "x: must have at least 1 item, got 0"),
        ({"maxItems": 1}, [0], [0, 1], "x: must have at most 1 item, got 2"),
        ({"minProperties": 1}, {"a": 1}, {}, "x: must have at least 1 property, got 0"),
        (
            {"maxProperties": 1},
            {"a": 1},
            {"a": 1, "b": 2},
            "x: must have at most 1 property, got 2",
        ),
        ({"const": 1}, 1.0, True, "x: must be 1"),
        ({"allOf": [{"type": "integer"}, {"minimum": 3}]}, 3, 2, "x: must be >= 3, got 2"),
        (
            {"anyOf": [{"type": "integer"}, {"minLength": 3}]},
            "abc",
            "ab",
            "x: must have at least 3 characters, got 2",
        ),
        (
            {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            1.5,
            2,
            "x: must match exactly one choice of its oneOf, but matches [0] and [1]",
        ),
        ({"not": {"type": "null"}}, 0, None, 'x: must not match {"type": "null"}'),
        ({"items": False, "prefixItems": [{"type": "integer"}]}, [1], [1, 2], "x[1]: not allowed"),
        (
            {"propertyNames": {"maxLength": 1}},
            {"a": 1},
            {"ab": 1},
            "x.ab: property name must have at most 1 character, got 2",
        ),
    ],
)
def test_each_constraint_keyword_is_enforced(
    schema: dict[str, object], good: object, bad: object, problem: str
) -> None:
    """R9.3: the constraint keywords JSON Schema defines are checked as it defines them."""
    assert check(holding("x", schema), {"x": good}) is None
    assert check(holding("x", schema), {"x": bad}) == problem


def test_number_bounds_skip_other_types() -> None:
    """R9.3: a bound constrains numbers only; a boolean or a string is left to ``type``."""
    bounded = holding("x", {"maximum": 0, "minLength": 5})
    assert check(bounded, {"x": True}) is None
    assert check(bounded, {"x": "long enough"}) is None
    assert check(bounded, {"x": 1}) == "x: must be <= 0, got 1"
    assert check(bounded, {"x": "abc"}) == "x: must have at least 5 characters, got 3"


def test_number_bounds_read_a_large_number_as_its_json_text_does() -> None:
    """R9.3: past 2**53 a float is not the number its text wrote: ``1e25`` meets a
    ``maximum`` of ``10**25`` exactly, as its text reads, and an exclusive one refuses it."""
    assert check(holding("x", {"maximum": 10**25}), {"x": 1e25}) is None
    assert check(holding("x", {"minimum": 10**25}), {"x": 1e25}) is None
    assert check(holding("x", {"exclusiveMaximum": 10**25}), {"x": 1e25}) == (
        "x: must be < 10000000000000000000000000, got 1e+25"
    )
    assert check(holding("x", {"maximum": 10**25}), {"x": 1.1e25}) == (
        "x: must be <= 10000000000000000000000000, got 1.1e+25"
    )
    assert check(holding("x", {"maximum": 1e25}), {"x": 10**25 + 1}) == (
        "x: must be <= 1e+25, got 10000000000000000000000001"
    )
    assert check(holding("x", {"maximum": 1e25}), {"x": 10**25}) is None


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        ("^[a-z-]+$", "main", "main\n"),
        ("v\\$$", "v$", "v$\n"),
        ("^[$]+$", "$$", "$$\n"),
        ("^[]$]+$", "]$", "]$\n"),
        ("^[\\w-]+$", "main", "main\n"),
        ("^[\\d]+$", "12", "12\n"),
        # Python's own syntax around it: inline flags, global or scoped, and comments.
        ("(?i)^[a-z]+$", "Main", "Main\n"),
        ("(?s)^a.b$", "a\nb", "a\nb\n"),
        ("(?a)^\\w+$", "main", "main\n"),
        ("^[a-z]+$(?#end)", "main", "main\n"),
        ("(?#$)^a$", "a", "a\n"),
        ("(?i:^[a-z]+$)", "Main", "Main\n"),
        ("(?m)^a(?-m:$)", "b\na", "b\na\n"),
        ("(?x)^a # [b\n$", "a", "a\n"),
        ("(?x)^a[ #$]$", "a#", "a#\n"),
        ("(?x: ^a $ )", "a", "a\n"),
    ],
)
def test_a_pattern_end_anchor_matches_only_at_the_end_of_the_text(
    pattern: str, good: str, bad: str
) -> None:
    """R9.3: ``$`` ends the text, as in JSON Schema's regular expressions, not also before
    a final newline as Python's does: a newline cannot slip into an argument so checked.
    An escaped ``\\$`` and a ``$`` in a character class or a comment stay as written; so
    does an anchor under the multiline flag only."""
    assert check(holding("x", {"pattern": pattern}), {"x": good}) is None
    assert check(holding("x", {"pattern": pattern}), {"x": bad}) == (
        f'x: must match the pattern "{pattern}"'
    )


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        ("(?m)^a$", "a\nb"),
        ("(?m:^a$)", "a\nb"),
        ("(?im)^a$", "A\nb"),
        ("(?x)(?m: ^a $ )", "a\nb"),
        ("(?m)(?-m:^b)(?#$)a$", "ba\nc"),
    ],
)
def test_a_multiline_pattern_keeps_its_end_of_line_anchors(pattern: str, value: str) -> None:
    """R9.3: under Python's multiline flag, global or scoped, a ``$`` ends each line, as the
    pattern asks: it is left as written."""
    assert check(holding("x", {"pattern": pattern}), {"x": value}) is None


def test_a_pattern_is_tried_after_the_length_that_bounds_its_text() -> None:
    """R9.3: whatever the keys' order, ``maxLength`` is checked before ``pattern``. Python's
    ``re`` backtracks: ``^(a+)+$`` takes time exponential in the length of a text it
    refuses, so a text longer than the schema allows must never reach it."""
    schema = holding("code", {"pattern": "^(a+)+$", "maxLength": 8, "type": "string"})
    assert check(schema, {"code": "a" * 8}) is None
    assert check(schema, {"code": "b" * 9}) == "code: must have at most 8 characters, got 9"
    assert check(schema, {"code": "a" * 64 + "!"}) == (
        "code: must have at most 8 characters, got 65"
    )
    names = {"type": "object", "propertyNames": {"pattern": "^(a+)+$", "maxLength": 8}}
    assert check(names, {"b" * 9: 1}) == (
        f"{'b' * 9}: property name must have at most 8 characters, got 9"
    )


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([1, True], True),
        ([0, False, None, "0", [0], {"a": 0}], True),
        ([{"a": 1, "b": [True]}, {"b": [True], "a": 1.0}], False),
        ([{"a": True}, {"a": 1}], True),
        ([[1, 2], [2, 1]], True),
    ],
)
def test_unique_items_compares_as_json_does(items: list[object], unique: bool) -> None:
    """R9.3: ``uniqueItems`` uses JSON equality: 1 equals 1.0, true is not 1, objects deeply."""
    verdict = check(holding("x", {"uniqueItems": True}), {"x": items})
    assert (verdict is None) is unique


def test_a_recursive_definition_checks_every_level() -> None:
    """R9.3: a ``$ref`` back to its own definition checks values at any depth."""
    schema = {
        "type": "object",
        "properties": {"list": {"$ref": "#/definitions/Cell"}},
        "definitions": {
            "Cell": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer", "minimum": 0},
                    "next": {"anyOf": [{"$ref": "#/definitions/Cell"}, {"type": "null"}]},
                },
                "required": ["value"],
            }
        },
    }
    chain: dict[str, object] = {"value": 0, "next": None}
    for value in range(1, 40):
        chain = {"value": value, "next": chain}
    assert check(schema, {"list": chain}) is None
    deep: dict[str, object] = {"value": -1, "next": None}
    for value in range(3):
        deep = {"value": value, "next": deep}
    assert check(schema, {"list": deep}) == "list.next.next.next.value: must be >= 0, got -1"
    assert check(holding("me", {"$ref": "#"}), {"me": {"me": {"me": 3}}}) == (
        "me.me.me: expected object, got integer"
    )


# What pydantic's ``model_json_schema()`` writes for a recursive model: a root that only
# refers to the model's definition.
RECURSIVE_MODEL: dict[str, object] = {
    "$defs": {"Node": PYDANTIC_LIKE["$defs"]["Node"]},  # type: ignore[index]
    "$ref": "#/$defs/Node",
}


async def test_a_recursive_pydantic_model_is_its_definition_at_the_root() -> None:
    """R9.7: a root ``$ref`` to an object definition is sent and checked as that definition."""
    ran: list[object] = []

    def body(**arguments: object) -> str:
        ran.append(arguments)
        return "ran"

    tree = Tool("tree", "Walk a tree.", RECURSIVE_MODEL, body)
    sent = tree.schema.parameters
    assert sent["type"] == "object"
    assert "$ref" not in sent
    assert sent["required"] == ("name",)
    assert tree.check_arguments(freeze_json({"name": "r", "children": [{}]})) == (
        "children[0].name: missing required property"
    )
    registry = ToolRegistry(HookBus(), [tree])
    arguments = {"name": "r", "children": [{"name": "leaf"}]}
    result = await registry.execute(ToolExecution("c1", "tree", freeze_json(arguments)))
    assert not result.is_error
    assert ran == [arguments]
