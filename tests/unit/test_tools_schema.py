"""The ``@tool`` decorator: JSON schema from signatures, type hints and docstrings (R9.7)."""

from __future__ import annotations

import enum
from typing import Annotated, Literal, NotRequired, TypedDict

import attrs
import pytest

from retinue._lossless import thaw_json
from retinue._request import ToolSchema
from retinue.tools import Tool, ToolContext, tool


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(TypedDict):
    x: int
    y: int
    label: NotRequired[str]


@attrs.frozen
class Window:
    width: int
    title: str = "untitled"


def schema_of(fn: Tool) -> object:
    return thaw_json(fn.parameters)


def test_tool_schema_golden_for_primitives_defaults_and_docstring() -> None:
    """R9.7: hints, defaults and the Google docstring become the model-facing schema."""

    @tool
    def search(query: str, limit: int = 10, score: float = 0.5, exact: bool = False) -> str:
        """Search the index.

        Searches every shard.

        Args:
            query: What to look for,
                in plain words.
            limit (int): At most this many hits.

        Returns:
            The hits.
        """
        return query

    assert search.name == "search"
    assert search.description == "Search the index.\n\nSearches every shard."
    assert schema_of(search) == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in plain words."},
            "limit": {"type": "integer", "description": "At most this many hits.", "default": 10},
            "score": {"type": "number", "default": 0.5},
            "exact": {"type": "boolean", "default": False},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_tool_schema_golden_for_containers_literals_enums_and_optionals() -> None:
    """R9.7: list, dict, tuple, Literal, Enum and ``X | None`` map to JSON schema."""

    @tool
    def paint(
        tags: list[str],
        weights: dict[str, float],
        grid: list[list[int]],
        pair: tuple[int, ...],
        mode: Literal["fast", "slow"],
        color: Color,
        note: str | None = None,
        level: Literal[1, 2] | None = None,
        anything: dict = {},  # type: ignore[type-arg]  # noqa: B006 - the schema must show it
        either: int | str = 0,
    ) -> None:
        """Paint."""

    assert schema_of(paint) == {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "weights": {"type": "object", "additionalProperties": {"type": "number"}},
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "pair": {"type": "array", "items": {"type": "integer"}},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "color": {"type": "string", "enum": ["red", "green"]},
            "note": {"type": ["string", "null"], "default": None},
            "level": {"type": ["integer", "null"], "enum": [1, 2, None], "default": None},
            "anything": {"type": "object", "default": {}},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 0},
        },
        "required": ["tags", "weights", "grid", "pair", "mode", "color"],
        "additionalProperties": False,
    }


def test_tool_schema_golden_for_typeddict_attrs_and_annotated() -> None:
    """R9.7: TypedDict and attrs records become closed objects; Annotated adds a description."""

    @tool
    def place(point: Point, window: Window, size: Annotated[int, "Size in pixels."] = 1) -> None:
        """Place a window."""

    assert schema_of(place) == {
        "type": "object",
        "properties": {
            "point": {
                "type": "object",
                "properties": {
                    "x": {"type": "integer"},
                    "y": {"type": "integer"},
                    "label": {"type": "string"},
                },
                "required": ["x", "y"],
                "additionalProperties": False,
            },
            "window": {
                "type": "object",
                "properties": {
                    "width": {"type": "integer"},
                    "title": {"type": "string", "default": "untitled"},
                },
                "required": ["width"],
                "additionalProperties": False,
            },
            "size": {"type": "integer", "description": "Size in pixels.", "default": 1},
        },
        "required": ["point", "window"],
        "additionalProperties": False,
    }


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
    """R9.7: *args, **kwargs, positional-only, sets and fixed tuples are refused at definition."""

    def star(*items: int) -> None: ...
    def double_star(**items: int) -> None: ...
    def positional(item: int, /) -> None: ...
    def a_set(items: set[int]) -> None: ...
    def fixed(pair: tuple[int, str]) -> None: ...
    def two_contexts(a: ToolContext, b: ToolContext) -> None: ...

    for fn in (star, double_star, positional, a_set, fixed, two_contexts):
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


def test_tool_docstring_argument_types_may_nest_parentheses() -> None:
    """R9.7: ``b (list(int)): ...`` documents ``b``; it is not a continuation of ``a``."""

    @tool
    def sum_up(a: int, b: list[int]) -> int:
        """Add.

        Args:
            a (int): first value.
            b (list(int)): second value.
        """
        return a + sum(b)

    assert schema_of(sum_up) == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "first value."},
            "b": {"type": "array", "items": {"type": "integer"}, "description": "second value."},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }


def test_tool_docstring_sections_end_the_description() -> None:
    """R9.7: only text before the first section is the description; other sections are dropped."""

    @tool
    def act(value: int) -> int:
        """Do the thing.

        Raises:
            ValueError: never.

        Args:
            value: The value.
        """
        return value

    assert act.description == "Do the thing."
    assert schema_of(act) == {
        "type": "object",
        "properties": {"value": {"type": "integer", "description": "The value."}},
        "required": ["value"],
        "additionalProperties": False,
    }


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
