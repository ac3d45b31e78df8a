"""A hand-written tool schema reaches the model in the shape every provider accepts: an array
schema without ``items`` and a root without ``properties``, which OpenAI refuses on every
request carrying the tool, are sent with the empty schema JSON Schema reads there (R9.7).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from retinue._lossless import freeze_json, thaw_json
from retinue.session import ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import Tool
from tests.helpers import OPTIONS, of_type, runtime


def nothing(**_arguments: object) -> None:
    return None


def holding(name: str, schema: object) -> dict[str, Any]:
    return {"type": "object", "properties": {name: schema}}


ANY_ITEMS: dict[str, Any] = {"type": "array", "items": {}}


@pytest.mark.parametrize(
    ("parameters", "sent"),
    [
        (holding("paths", {"type": "array"}), holding("paths", ANY_ITEMS)),
        (
            holding("paths", {"type": ["array", "null"]}),
            holding("paths", {"type": ["array", "null"], "items": {}}),
        ),
        (
            holding("grid", {"type": "array", "items": {"type": "array"}}),
            holding("grid", {"type": "array", "items": ANY_ITEMS}),
        ),
        (
            holding("pair", {"type": "array", "prefixItems": [{"type": "array"}]}),
            holding("pair", {"type": "array", "prefixItems": [ANY_ITEMS], "items": {}}),
        ),
        (
            {**holding("p", {"$ref": "#/$defs/P"}), "$defs": {"P": {"anyOf": [{"type": "array"}]}}},
            {**holding("p", {"$ref": "#/$defs/P"}), "$defs": {"P": {"anyOf": [ANY_ITEMS]}}},
        ),
        (
            holding("tags", {"type": "object", "additionalProperties": {"type": "array"}}),
            holding("tags", {"type": "object", "additionalProperties": ANY_ITEMS}),
        ),
        ({"type": "object"}, {"type": "object", "properties": {}}),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            {"type": "object", "additionalProperties": {"type": "string"}, "properties": {}},
        ),
    ],
)
def test_a_shape_providers_refuse_is_sent_spelled_out(
    parameters: dict[str, Any], sent: dict[str, Any]
) -> None:
    """R9.7: ``items: {}`` is added to each array schema without ``items`` (nested, nullable,
    behind a ``$ref``), ``properties: {}`` to a root without ``properties``: what the model
    sees; the arguments are checked against the schema as written, which means the same."""
    built = Tool("t", "A tool.", parameters, nothing)
    assert thaw_json(built.schema.parameters) == sent
    assert thaw_json(built.parameters) == parameters


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("description", None),
        ("title", 5),
        ("$comment", ["c"]),
        ("$schema", 2020),
        ("format", None),
        ("contentMediaType", 1),
        ("contentEncoding", False),
        ("examples", {"one": 1}),
        ("deprecated", "yes"),
        ("readOnly", 1),
        ("writeOnly", None),
        ("contentSchema", "integer"),
    ],
)
def test_an_annotation_of_the_wrong_json_type_is_left_out_of_the_schema_sent(
    keyword: str, value: object
) -> None:
    """R9.7: JSON Schema's meta-schema gives each annotation a type (``description`` a
    string, ``examples`` an array, ``readOnly`` a boolean), and a provider checking tools
    against it refuses every request carrying one that breaks it (``"description": null``
    from a converter dumping unset fields, pydantic's ``examples`` as an object): the tool
    builds, and the schema sent leaves it out, at any depth; it constrained nothing."""
    nested = {"type": "object", "properties": {"b": {"type": "string", keyword: value}}}
    parameters = {**holding("a", nested), keyword: value}
    built = Tool("t", "A tool.", parameters, nothing)
    assert thaw_json(built.schema.parameters) == holding(
        "a", {"type": "object", "properties": {"b": {"type": "string"}}}
    )
    assert thaw_json(built.parameters) == parameters


def test_annotations_of_their_own_type_are_sent_as_written() -> None:
    """R9.7: well-typed annotations, ``contentSchema``'s inner ones too, reach the model."""
    parameters = holding(
        "a",
        {
            "type": "string",
            "description": "d",
            "title": "t",
            "examples": ["x"],
            "deprecated": False,
            "format": "date",
            "contentSchema": {"type": "object", "description": "inner"},
        },
    )
    built = Tool("t", "A tool.", parameters, nothing)
    assert thaw_json(built.schema.parameters) == parameters


def test_data_that_looks_like_a_schema_is_sent_as_written() -> None:
    """R9.7: ``const``, ``enum``, ``default`` and ``examples`` hold values, not schemas:
    nothing is added to them, nor to a property merely named ``items``."""
    parameters = {
        "type": "object",
        "properties": {
            "kind": {"const": {"type": "array"}, "default": {"type": "array"}},
            "one": {"enum": [{"type": "array"}], "examples": [{"type": "array"}]},
            "items": {"type": "string"},
        },
    }
    built = Tool("t", "A tool.", parameters, nothing)
    assert thaw_json(built.schema.parameters) == parameters
    assert built.schema.parameters is built.parameters


async def test_the_request_carries_the_spelled_out_schema_and_the_call_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.7, R9.3: the model's request carries ``items: {}``, and a call with any items
    reaches the body, as the schema written allows."""
    got: list[object] = []

    async def body(paths: list[object]) -> str:
        await trio.lowlevel.checkpoint()
        got.append(paths)
        return "done"

    files = Tool("files", "List files.", holding("paths", {"type": "array"}), body)
    model = ScriptedModel(
        [CallTools([ToolCallSpec("files", '{"paths": ["a", 1, {"b": null}]}')]), Reply("ok")]
    )
    async with runtime(model, tools=[files]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        [request_tool] = model.requests[0].tools
        assert thaw_json(request_tool.parameters) == holding("paths", ANY_ITEMS)
        [logged] = of_type(agent.session.events, "tool/result")
        assert isinstance(logged.data, ToolResultEvent)
        assert logged.data.is_error is False
    assert got == [["a", 1, {"b": None}]]
    assert files.check_arguments(freeze_json({"paths": "a"})) == (
        "paths: expected array, got string"
    )
