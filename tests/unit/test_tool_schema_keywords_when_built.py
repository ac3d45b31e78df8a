"""A hand-written tool schema when the tool is built: what the validator would not enforce is
refused, annotations and nested property names pass through, and decorated tools still build
(R9.3 stage 3, R9.7).
"""

from __future__ import annotations

import re

import pytest

from retinue._lossless import freeze_json
from retinue.tools import tool
from tests.unit._schema_keywords_kit import built, check, holding


@pytest.mark.parametrize(
    ("parameters", "error", "where"),
    [
        ({}, ValueError, "parameters.type"),
        ({"type": "string"}, ValueError, "parameters.type"),
        ({"properties": {"a": {"type": "string"}}}, ValueError, "parameters.type"),
        ({"type": ["object", "null"]}, ValueError, "parameters.type"),
        (holding("a", {"type": "strng"}), ValueError, "parameters.properties.a.type"),
        (holding("a", {"type": ["string", "nul"]}), ValueError, "parameters.properties.a.type[1]"),
        (holding("a", {"type": []}), ValueError, "parameters.properties.a.type"),
        (holding("a", {"type": 3}), TypeError, "parameters.properties.a.type"),
        (holding("days", {"contains": {}}), ValueError, "parameters.properties.days.contains"),
        ({"type": "object", "patternProperties": {}}, ValueError, "parameters.patternProperties"),
        ({"type": "object", "nullable": True}, ValueError, "parameters.nullable"),
        (holding("a", {"if": {}, "then": {}}), ValueError, "parameters.properties.a.if"),
        (holding("a", {"minimum": "1"}), TypeError, "parameters.properties.a.minimum"),
        (
            holding("a", {"exclusiveMinimum": True}),
            TypeError,
            "parameters.properties.a.exclusiveMinimum",
        ),
        (holding("a", {"minLength": -1}), ValueError, "parameters.properties.a.minLength"),
        (holding("a", {"maxItems": 1.5}), TypeError, "parameters.properties.a.maxItems"),
        (holding("a", {"multipleOf": 0}), ValueError, "parameters.properties.a.multipleOf"),
        (holding("a", {"pattern": "("}), ValueError, "parameters.properties.a.pattern"),
        # A count past what ``re`` holds: a bare OverflowError before.
        (
            holding("a", {"pattern": "a{9" + "9" * 19 + "}"}),
            ValueError,
            "parameters.properties.a.pattern",
        ),
        (holding("a", {"uniqueItems": 1}), TypeError, "parameters.properties.a.uniqueItems"),
        (holding("a", {"items": [{}]}), TypeError, "parameters.properties.a.items"),
        (holding("a", {"anyOf": []}), ValueError, "parameters.properties.a.anyOf"),
        (holding("a", {"oneOf": {}}), TypeError, "parameters.properties.a.oneOf"),
        (holding("a", {"enum": "abc"}), TypeError, "parameters.properties.a.enum"),
        ({"type": "object", "required": "a"}, TypeError, "parameters.required"),
        ({"type": "object", "properties": []}, TypeError, "parameters.properties"),
        (holding("a", 3), TypeError, "parameters.properties.a"),
        (
            holding("a", {"items": {"maximum": "x"}}),
            TypeError,
            "parameters.properties.a.items.maximum",
        ),
        (
            {"type": "object", "$defs": {"X": {"minimum": 0, "exclusiveMinimum": False}}},
            TypeError,
            "parameters.$defs.X.exclusiveMinimum",
        ),
        (holding("a", {"$ref": "#/$defs/Missing"}), ValueError, "parameters.properties.a.$ref"),
        (holding("a", {"$ref": "other.json#/x"}), ValueError, "parameters.properties.a.$ref"),
        (
            {**holding("a", {"$ref": "#/$defs/A"}), "$defs": {"A": {"$ref": "#/$defs/A"}}},
            ValueError,
            "parameters.$defs.A.$ref",
        ),
        ({"type": "object", "allOf": [{"$ref": "#"}]}, ValueError, "parameters.allOf[0].$ref"),
        # Property names providers refuse, which would fail every request carrying the tool.
        (holding("città", {"type": "string"}), ValueError, "parameters.properties"),
        (holding("x" * 65, {"type": "string"}), ValueError, "parameters.properties"),
        (holding("two words", {"type": "string"}), ValueError, "parameters.properties"),
    ],
)
def test_a_schema_the_validator_would_not_enforce_is_refused_when_built(
    parameters: dict[str, object], error: type[Exception], where: str
) -> None:
    """R9.7: a root that is not an object, an unknown type, an unknown keyword or a malformed
    one, or a parameter name providers refuse, is refused when the tool is built, naming
    the keyword's path.
    """
    with pytest.raises(error, match=f"^{re.escape(where)}: "):
        built(parameters)


@pytest.mark.parametrize(
    ("parameters", "where", "repeated"),
    [
        ({**holding("a", {}), "required": ["a", "a"]}, "parameters.required[1]", 'property "a"'),
        (
            holding("a", {"type": ["string", "null", "string"]}),
            "parameters.properties.a.type[2]",
            'type "string"',
        ),
    ],
    ids=["required", "type"],
)
def test_a_name_listed_twice_in_required_or_type_is_refused_when_built(
    parameters: dict[str, object], where: str, repeated: str
) -> None:
    """R9.7: JSON Schema's meta-schema wants the names of ``required`` and of a ``type``
    array unique; a schema repeating one is no valid schema, which a provider checking
    tools against the meta-schema refuses on every request, so it is refused when built."""
    with pytest.raises(ValueError) as raised:
        built(parameters)
    assert str(raised.value) == f"{where}: {repeated} is listed twice"


def test_a_reference_loop_through_unions_is_refused_when_built() -> None:
    """R9.7: references that lead back without descending into a value would never end."""
    parameters = {
        **holding("a", {"$ref": "#/$defs/A"}),
        "$defs": {
            "A": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/B"}]},
            "B": {"allOf": [{"$ref": "#/$defs/A"}]},
        },
    }
    with pytest.raises(ValueError, match="would never end"):
        built(parameters)


def test_annotations_pass_through_and_constrain_nothing() -> None:
    """R9.7: annotations (``format`` among them) are kept for the model and never refused."""
    schema = {
        "type": "object",
        "title": "T",
        "description": "d",
        "$comment": "c",
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {
            "when": {
                "type": "string",
                "format": "date-time",
                "examples": ["2024-01-01"],
                "deprecated": True,
                "readOnly": True,
                "writeOnly": False,
                "default": 3,
                "contentMediaType": "text/plain",
                "contentEncoding": "base64",
            },
            "anything": True,
            "nothing": False,
        },
    }
    definition = built(schema)
    assert definition.schema.parameters == freeze_json(schema)
    assert check(schema, {"when": "not a date"}) is None
    assert check(schema, {"anything": [1, {"a": None}]}) is None
    assert check(schema, {"nothing": 1}) == "nothing: not allowed"


def test_decorated_tools_still_build_with_the_keywords_they_emit() -> None:
    """R9.7: the ``@tool`` decorator's schemas (unions, enums, maps, records) pass the check."""

    @tool
    def plan(
        city: str,
        scores: dict[str, int],
        tags: tuple[str, ...] = (),
        limit: int | None = None,
        mode: str | list[int] = "x",
    ) -> str:
        """Plan."""
        return city

    assert plan.check_arguments(freeze_json({"city": "Oslo", "scores": {"a": 1}})) is None
    assert plan.check_arguments(freeze_json({"city": "Oslo", "scores": {"a": "x"}})) == (
        "scores.a: expected integer, got string"
    )


def test_nested_property_names_are_left_free() -> None:
    """R9.7: providers hold only a tool's parameter names to their rule; keys inside a
    nested object build and are checked as written."""
    parameters = holding("place", {"type": "object", "properties": {"città": {"type": "string"}}})
    assert check(parameters, {"place": {"città": "Roma"}}) is None


@pytest.mark.parametrize("keyword", ["anyOf", "oneOf", "allOf", "not", "enum", "const"])
def test_a_keyword_providers_refuse_at_the_root_is_refused_when_built(keyword: str) -> None:
    """R9.7: OpenAI refuses ``oneOf``, ``anyOf``, ``allOf``, ``enum``, ``const`` and ``not`` at
    the top level of a function's parameters, Anthropic the first three in an
    ``input_schema``: a root holding one would fail every request carrying the tool.
    """
    values: dict[str, object] = {
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        "allOf": [{"required": ["a"]}],
        "not": {"required": ["a", "b"]},
        "enum": [{"a": "x"}],
        "const": {"a": "x"},
    }
    parameters = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        keyword: values[keyword],
    }
    with pytest.raises(ValueError, match=f"^{re.escape(f'parameters.{keyword}')}: .*top level"):
        built(parameters)


def test_a_json_string_field_builds_with_its_content_schema_unchecked() -> None:
    """R9.7: ``contentSchema`` (pydantic's ``Json[int]``) is an annotation, as the content
    vocabulary's keywords all are: the tool builds, and the string is not parsed."""
    schema = {
        "type": "object",
        "properties": {
            "payload": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"type": "integer"},
            }
        },
    }
    definition = built(schema)
    assert definition.schema.parameters == freeze_json(schema)
    assert check(schema, {"payload": "not json"}) is None
    assert check(schema, {"payload": 3}) == "payload: expected string, got integer"


def test_an_extension_keyword_passes_through_as_an_annotation() -> None:
    """R9.7: an ``x-`` keyword (pydantic's ``json_schema_extra``, OpenAPI's extensions) is no
    constraint by convention: the tool builds and the schema is sent as written, not refused
    as a keyword the validator does not enforce."""
    schema = {
        "type": "object",
        "x-origin": "billing",
        "properties": {"days": {"type": "integer", "maximum": 7, "x-unit": {"name": "day"}}},
        "$defs": {"Day": {"type": "integer", "x-unit": "day"}},
    }
    definition = built(schema)
    assert definition.schema.parameters == freeze_json(schema)
    assert check(schema, {"days": 3}) is None
    assert check(schema, {"days": 8}) == "days: must be <= 7, got 8"
