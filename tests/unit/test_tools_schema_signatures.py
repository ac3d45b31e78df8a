"""The ``@tool`` decorator: the parameters and names it takes, injects or refuses (R9.7)."""

from __future__ import annotations

import collections.abc
import typing
from collections.abc import Mapping
from typing import Annotated, TypedDict

import attr
import pytest

from retinue._lossless import freeze_json
from retinue._request import ToolSchema
from retinue.tools import Tool, ToolContext, tool
from tests.unit._tool_kit import Branch, Window, schema_of


class Node(TypedDict):
    name: str
    children: list[Node]


@attr.s
class Query:
    text = attr.ib()
    limit = attr.ib(default=2)


def bind(fn: Tool, arguments: Mapping[str, object]) -> dict[str, object]:
    assert fn.bind is not None
    return fn.bind(arguments)


def test_tool_schema_omits_the_injected_context_parameter() -> None:
    """R9.7: a ToolContext parameter is injected by the registry, never shown to the model."""

    @tool
    async def whoami(ctx: ToolContext, verbose: bool = False) -> str:
        """Say who called."""
        return ctx.call_id

    assert whoami.context_parameter == "ctx"
    assert schema_of(whoami) == {
        "type": "object",
        "properties": {"verbose": {"type": "boolean", "default": False}},
        "additionalProperties": False,
    }


def test_tool_schema_of_a_function_without_parameters_or_docstring() -> None:
    """R9.7: no parameters and no docstring give an empty closed object and no description."""

    @tool
    def ping() -> str:
        return "pong"

    assert ping.description == ""
    assert schema_of(ping) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_tool_decorator_options_override_name_and_description() -> None:
    """R9.7: ``name=``/``description=`` override the function's; only the schema reaches the model."""

    @tool(name="lookup_city", description="Find a city.", parallel_safe=True, timeout=2.5)
    def lookup(city: str) -> str:
        """Ignored docstring."""
        return city

    assert lookup.schema == ToolSchema("lookup_city", "Find a city.", lookup.parameters)
    assert lookup.parallel_safe is True
    assert lookup.timeout == 2.5


def test_tool_decorator_rejects_signatures_it_cannot_express() -> None:
    """R9.7: *args (a JSON object has only names) and fixed tuples are refused at definition."""

    def star(*items: int) -> None: ...
    def fixed(pair: tuple[int, str]) -> None: ...
    def two_contexts(a: ToolContext, b: ToolContext) -> None: ...

    for fn in (star, fixed, two_contexts):
        with pytest.raises(TypeError):
            tool(fn)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("name", "", ValueError),
        ("name", "*", ValueError),
        ("name", "two words", ValueError),
        ("timeout", 0, ValueError),
        ("timeout", -1.0, ValueError),
        ("timeout", float("inf"), ValueError),
        ("timeout", "5", TypeError),
        ("parallel_safe", "yes", TypeError),
    ],
)
def test_tool_construction_validates_its_declarations(
    field: str, value: object, error: type
) -> None:
    """R9.7: a tool's name, timeout and parallel_safe declaration are checked when it is built."""
    fields: dict[str, object] = {
        "name": "ok",
        "description": "",
        "parameters": {"type": "object"},
        "fn": lambda: None,
    }
    fields[field] = value
    with pytest.raises(error):
        Tool(**fields)  # type: ignore[arg-type]


def test_tool_parameters_are_frozen_json() -> None:
    """R9.7: a hand-written schema is validated as lossless JSON and frozen."""
    definition = Tool("t", "d", {"type": "object", "properties": {}}, lambda: None)
    with pytest.raises(TypeError):
        definition.parameters["type"] = "array"
    with pytest.raises(TypeError):
        Tool("t", "d", ["not", "an", "object"], lambda: None)


def test_an_optional_tool_context_is_injected_too() -> None:
    """R9.7: ``ToolContext | None`` is the injected context as well; the model never sees it,
    so it cannot forge one. Another union holding ToolContext is refused.
    """

    @tool
    async def whoami(x: int, ctx: ToolContext | None = None) -> str:
        """Say who called."""
        return "" if ctx is None else str(ctx.agent_id)

    assert whoami.context_parameter == "ctx"
    assert "ctx" not in whoami.parameters["properties"]  # type: ignore[operator]
    with pytest.raises(TypeError, match="may only be optional"):

        @tool
        async def mixed(ctx: ToolContext | int) -> None:
            """Mixed."""


def test_tool_schema_of_a_bare_sequence_allows_items_of_any_type() -> None:
    """R9.7: a bare ``list``, ``tuple``, ``List`` or ``Sequence`` (nullable too) still carries
    ``items`` (any item): providers refuse an array schema without one.
    """

    @tool
    def tag(
        items: list,  # type: ignore[type-arg]
        pair: tuple,  # type: ignore[type-arg]
        seq: collections.abc.Sequence,  # type: ignore[type-arg]
        legacy: typing.List,  # type: ignore[type-arg]  # noqa: UP006 - the legacy spelling
        maybe: list | None = None,  # type: ignore[type-arg]
    ) -> str:
        """Tag things."""
        return "ok"

    any_items = {"type": "array", "items": {}}
    assert schema_of(tag)["properties"] == {  # type: ignore[index]
        "items": any_items,
        "pair": any_items,
        "seq": any_items,
        "legacy": any_items,
        "maybe": {"type": ["array", "null"], "items": {}, "default": None},
    }
    assert (
        tag.check_arguments(
            freeze_json({"items": [1, "a"], "pair": [], "seq": [None], "legacy": [{}]})
        )
        is None
    )
    assert bind(tag, {"pair": [1, "a"]}) == {"pair": (1, "a")}


def test_a_none_default_makes_the_parameter_nullable() -> None:
    """R9.7: ``x: int = None`` accepts the null its schema names as the default, as the
    implicit ``int | None`` of older Pythons did.
    """

    @tool
    def search(
        query: str,
        limit: int = None,  # type: ignore[assignment]  # noqa: RUF013 - the case under test
        window: Annotated[Window, "Where to look."] = None,  # type: ignore[assignment]
        key: Annotated[int | str, "Which one."] = None,  # type: ignore[assignment]  # noqa: RUF013
        anything: object = None,
    ) -> str:
        """Search."""
        return query

    properties = schema_of(search)["properties"]  # type: ignore[index]
    assert properties["limit"] == {"type": ["integer", "null"], "default": None}
    assert properties["window"]["type"] == ["object", "null"]
    assert properties["window"]["description"] == "Where to look."
    assert properties["key"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}],
        "description": "Which one.",
        "default": None,
    }
    assert properties["anything"] == {"default": None}
    arguments = {"query": "q", "limit": None, "window": None, "key": None}
    assert search.check_arguments(freeze_json(arguments)) is None
    assert bind(search, arguments) == arguments
    assert bind(search, {"window": {"width": 3}, "key": 2.0}) == {"window": Window(3), "key": 2}


def test_an_untyped_attrs_field_takes_any_value() -> None:
    """R9.7: an attrs field without a type (``x = attr.ib()``) is "any", like an unannotated
    parameter, not "null".
    """

    @tool
    def ask(q: Query) -> str:
        """Ask."""
        return repr(q)

    assert schema_of(ask)["properties"]["q"] == {  # type: ignore[index]
        "type": "object",
        "properties": {"text": {}, "limit": {"default": 2}},
        "required": ["text"],
        "additionalProperties": False,
    }
    assert ask.check_arguments(freeze_json({"q": {"text": "hello", "limit": 3}})) is None
    assert bind(ask, {"q": {"text": "hello"}}) == {"q": Query("hello")}


@pytest.mark.parametrize("name", ["météo", "web.search", "x" * 65, "a b", "*", ""])
def test_tool_names_follow_the_providers_rule(name: str) -> None:
    """R9.7: a name providers would refuse (not 1 to 64 ASCII letters, digits, ``_`` or ``-``)
    is refused when the tool is built, with the rule in the message.
    """
    with pytest.raises(ValueError, match="1 to 64 ASCII letters, digits, '_' or '-'"):
        Tool(name, "", {"type": "object"}, lambda: None)


def test_tool_names_at_the_providers_limit_are_accepted() -> None:
    """R9.7: 64 characters of letters, digits, ``_`` and ``-`` is a valid name."""
    name = "Get-weather_2" + "x" * 51
    assert Tool(name, "", {"type": "object"}, lambda: None).name == name


@pytest.mark.parametrize("record", [Node, Branch])
def test_a_recursive_record_is_described_once_under_defs(record: type) -> None:
    """R9.7: a type that contains itself (a tree) is described once under ``$defs`` and
    referred to there, at the parameter and inside itself, without recursing to the limit.
    """

    def walk(tree: record) -> str:  # type: ignore[valid-type]
        return "x"

    walk.__annotations__["tree"] = record
    schema = schema_of(tool(walk))
    reference = {"$ref": f"#/$defs/{record.__name__}"}
    assert schema["properties"]["tree"] == reference  # type: ignore[index]
    assert f"'$ref': '#/$defs/{record.__name__}'" in str(schema["$defs"])  # type: ignore[index]


def test_a_type_used_twice_side_by_side_is_not_recursive() -> None:
    """R9.7: the same record in two places is described once, each place referring to it."""

    @tool
    def join(left: Window, right: list[Window]) -> str:
        """Join."""
        return "x"

    properties = schema_of(join)["properties"]  # type: ignore[index]
    assert properties["right"]["items"] == properties["left"]
