"""The ``@tool`` decorator: JSON schema from signatures, type hints and docstrings (R9.7)."""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import re
import typing
from collections.abc import Mapping
from typing import Annotated, Literal, NotRequired, TypedDict

import annotated_types
import attr
import attrs
import pytest
from pydantic import Field

from retinue._lossless import freeze_json, thaw_json
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


class Node(TypedDict):
    name: str
    children: list[Node]


@attrs.frozen
class Branch:
    leaves: list[str]
    parent: Branch | None = None


@attr.s
class Query:
    text = attr.ib()
    limit = attr.ib(default=2)


def search_index(index: str, query: str, limit: int = 5) -> str:
    """Search one index.

    Args:
        query: What to look for.
    """
    return f"{index}:{query}:{limit}"


def schema_of(fn: Tool) -> object:
    return thaw_json(fn.parameters)


def bind(fn: Tool, arguments: Mapping[str, object]) -> dict[str, object]:
    assert fn.bind is not None
    return fn.bind(arguments)


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


@dataclasses.dataclass(frozen=True)
class Frame:
    width: int
    title: str = "untitled"
    tags: list[str] = dataclasses.field(default_factory=list)
    note: str | None = None
    cached: int = dataclasses.field(default=0, init=False)


UserId = typing.NewType("UserId", int)


def test_tool_schema_of_a_dataclass_and_a_newtype() -> None:
    """R9.7: a dataclass is a closed object of its constructor's fields, as an attrs class
    is (a factory's field optional, with no default shown; a ``None`` default accepting
    null); a ``NewType`` is described as its supertype."""

    @tool
    def frame(frame: Frame, owner: UserId) -> None:
        """Frame a window."""

    assert schema_of(frame) == {
        "type": "object",
        "properties": {
            "frame": {
                "type": "object",
                "properties": {
                    "width": {"type": "integer"},
                    "title": {"type": "string", "default": "untitled"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "note": {"type": ["string", "null"], "default": None},
                },
                "required": ["width"],
                "additionalProperties": False,
            },
            "owner": {"type": "integer"},
        },
        "required": ["frame", "owner"],
        "additionalProperties": False,
    }


def test_annotated_constraints_of_pydantic_and_annotated_types_become_schema_keywords() -> None:
    """R9.7: ``Field(ge=..., le=..., description=...)`` and annotated-types' constraints
    inside ``Annotated`` become bounds, lengths (by the value's JSON type) and a pattern
    (a compiled regex's too), and the arguments are checked against them."""

    @tool
    def forecast(
        days: Annotated[int, Field(ge=1, le=7, description="Days ahead.")],
        city: Annotated[str, annotated_types.MinLen(2), re.compile("^[A-Z]")],
        tags: Annotated[list[str], annotated_types.MaxLen(3)] = [],  # noqa: B006
        low: Annotated[float | None, annotated_types.Interval(gt=-100, lt=100)] = None,
    ) -> str:
        """Forecast."""
        return city

    properties = schema_of(forecast)["properties"]  # type: ignore[index]
    assert properties["days"] == {
        "type": "integer",
        "description": "Days ahead.",
        "minimum": 1,
        "maximum": 7,
    }
    assert properties["city"] == {"type": "string", "minLength": 2, "pattern": "^[A-Z]"}
    assert properties["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "maxItems": 3,
        "default": [],
    }
    assert properties["low"] == {
        "type": ["number", "null"],
        "exclusiveMinimum": -100,
        "exclusiveMaximum": 100,
        "default": None,
    }
    wrong = freeze_json({"days": 9, "city": "o", "tags": ["a", "b", "c", "d"], "low": 100})
    assert forecast.check_arguments(wrong) == (
        "days: must be <= 7, got 9; city: must have at least 2 characters, got 1; "
        "tags: must have at most 3 items, got 4; low: must be < 100, got 100"
    )


def test_a_numeric_bound_on_a_type_without_numbers_is_refused_when_decorated() -> None:
    """R9.7: ``Field(gt=1)`` on a ``str`` would constrain nothing: refused at decoration
    naming the parameter, rather than ignored."""
    with pytest.raises(TypeError, match=r"label\): a numeric bound \(gt\) .* not string"):

        @tool
        def tag(label: Annotated[str, Field(gt=1)]) -> str:
            """Tag."""
            return label


def test_a_length_bound_on_a_union_bounds_each_sized_member() -> None:
    """R9.7: ``max_length`` on ``list[int] | str`` bounds the list's items and the string's
    characters, each keyword applying to its own JSON type."""

    @tool
    def take(x: Annotated[list[int] | str, Field(max_length=2)]) -> str:
        """Take."""
        return "ok"

    assert (
        take.check_arguments(freeze_json({"x": "abc"}))
        == "x: must have at most 2 characters, got 3"
    )
    assert (
        take.check_arguments(freeze_json({"x": [1, 2, 3]})) == "x: must have at most 2 items, got 3"
    )
    assert take.check_arguments(freeze_json({"x": 7})) is not None


def test_repeated_constraints_all_hold_and_a_compiled_patterns_flags_are_kept() -> None:
    """R9.7: repeated bounds keep the tightest (both then hold), a second step or pattern
    joins ``allOf``; a compiled pattern, bare or in ``Field(pattern=...)``, keeps its
    flags written inline."""

    @tool
    def pick(
        count: Annotated[int, annotated_types.Ge(5), annotated_types.Ge(1), Field(le=9, gt=0)],
        step: Annotated[int, annotated_types.MultipleOf(2), annotated_types.MultipleOf(3)],
        name: Annotated[str, re.compile("^[a-z]+$", re.IGNORECASE)],
        code: Annotated[str, Field(pattern=re.compile("^x"))],
    ) -> str:
        """Pick."""
        return name

    properties = schema_of(pick)["properties"]  # type: ignore[index]
    assert properties["count"] == {
        "type": "integer",
        "minimum": 5,
        "maximum": 9,
        "exclusiveMinimum": 0,
    }
    assert properties["step"] == {"type": "integer", "multipleOf": 2, "allOf": [{"multipleOf": 3}]}
    assert properties["name"] == {"type": "string", "pattern": "(?i)^[a-z]+$"}
    assert properties["code"] == {"type": "string", "pattern": "^x"}
    assert pick.check_arguments(
        freeze_json({"count": 2, "step": 4, "name": "ABC", "code": "y"})
    ) == (
        'count: must be >= 5, got 2; step: must be a multiple of 3, got 4; code: must match the pattern "^x"'
    )


def test_a_compiled_patterns_ascii_flag_is_kept() -> None:
    """R9.7: ``re.ASCII`` narrows ``\\w`` and ``\\d`` to ASCII; dropped, the check would take
    what the compiled pattern refuses (``café`` as a ``\\w+`` word)."""

    @tool
    def tag(
        name: Annotated[str, re.compile(r"^\w+$", re.ASCII)],
        code: Annotated[str, Field(pattern=re.compile(r"^\d+$", re.ASCII | re.IGNORECASE))],
    ) -> str:
        """Tag."""
        return name

    properties = schema_of(tag)["properties"]  # type: ignore[index]
    assert properties["name"] == {"type": "string", "pattern": r"(?a)^\w+$"}
    assert properties["code"] == {"type": "string", "pattern": r"(?ia)^\d+$"}
    assert re.search(r"^\w+$", "café", re.ASCII) is None
    assert tag.check_arguments(freeze_json({"name": "café", "code": "٣"})) == (
        r'name: must match the pattern "(?a)^\w+$"; code: must match the pattern "(?ia)^\d+$"'
    )
    assert tag.check_arguments(freeze_json({"name": "cafe", "code": "3"})) is None


def test_a_flagged_patterns_end_anchor_still_ends_the_text() -> None:
    """R9.3, R9.7: the flags a pattern carries inline, its author's (pydantic's
    ``Field(pattern=...)``) or a compiled pattern's written there, keep its ``$`` at the
    end of the text: a newline does not slip in at the end."""

    @tool
    def branch(
        name: Annotated[str, Field(pattern=r"(?i)^[a-z]+$")],
        code: Annotated[str, re.compile(r"^[a-z]+$", re.ASCII | re.IGNORECASE)],
    ) -> str:
        """Branch."""
        return name

    assert branch.check_arguments(freeze_json({"name": "Main", "code": "Dev"})) is None
    assert branch.check_arguments(freeze_json({"name": "main\n", "code": "dev\n"})) == (
        'name: must match the pattern "(?i)^[a-z]+$"; code: must match the pattern "(?ia)^[a-z]+$"'
    )


def test_enum_members_inside_a_default_are_shown_by_value() -> None:
    """R9.7: a default holding enum members (a list, a dict of them) is shown by their
    values, as a default that is one member is, rather than left out of the schema."""

    @tool
    def paint(
        colors: list[Color] = [Color.RED],  # noqa: B006 - a default read, never changed
        by_room: dict[str, Color] | None = {"hall": Color.GREEN},  # noqa: B006
        first: Color = Color.GREEN,
    ) -> str:
        """Paint."""
        return repr((colors, by_room, first))

    properties = schema_of(paint)["properties"]  # type: ignore[index]
    assert properties["colors"]["default"] == ["red"]
    assert properties["by_room"]["default"] == {"hall": "green"}
    assert properties["first"]["default"] == "green"


def test_a_pydantic_field_as_a_default_is_refused_pointing_to_annotated() -> None:
    """R9.7: ``n: int = Field(default=3, ge=1)`` would hand the body the ``FieldInfo``
    itself: refused at decoration, naming the parameter and the ``Annotated`` form."""
    with pytest.raises(TypeError, match=r"days\(n\): a pydantic Field\(\.\.\.\) as the default"):

        @tool
        def days(n: int = Field(default=3, ge=1)) -> int:
            """Days."""
            return n


@dataclasses.dataclass
class Scaled:
    value: int
    factor: dataclasses.InitVar[int]

    def __post_init__(self, factor: int) -> None:
        self.value *= factor


def test_a_dataclass_taking_an_init_var_is_refused_when_decorated() -> None:
    """R9.7: an ``InitVar`` is a constructor argument but no field, so no schema would ask
    for it and every call would fail: refused at decoration, naming it."""
    with pytest.raises(TypeError, match=r"scale\(s\): Scaled takes factor .* InitVar"):

        @tool
        def scale(s: Scaled) -> int:
            """Scale."""
            return s.value


def test_a_length_bound_on_a_type_without_a_length_is_refused_when_decorated() -> None:
    """R9.7: ``min_length`` on an int says nothing the schema could check: refused at
    decoration naming the parameter, rather than ignored."""
    with pytest.raises(TypeError, match=r"count\): a length bound .* not integer"):

        @tool
        def tally(count: Annotated[int, Field(min_length=2)]) -> int:
            """Tally."""
            return count


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


class WebSearch:
    """A search service."""

    async def __call__(self, query: str) -> str:
        """Search the web.

        Args:
            query: What to look for.
        """
        return query


class Undocumented:
    """Look things up."""

    async def __call__(self, query: str) -> str:
        return query


def test_a_callable_object_is_documented_by_its_call_method_else_its_class() -> None:
    """R9.7: an instance's ``__call__`` docstring gives the description and the parameter
    descriptions, as a function's does; without one, the class docstring describes it.
    """
    search = tool(name="search")(WebSearch())
    assert search.description == "Search the web."
    assert _documented_properties(search) == {"query": "What to look for."}
    assert tool(name="lookup")(Undocumented()).description == "Look things up."


def _documented_properties(fn: Tool) -> dict[str, str]:
    schema = schema_of(fn)
    assert isinstance(schema, dict)
    properties = schema["properties"]
    assert isinstance(properties, dict)
    return {name: str(spec.get("description")) for name, spec in properties.items()}


def test_tool_numpy_docstring_documents_the_parameters() -> None:
    """R9.7: a NumPy docstring's underlined sections end the description and its
    ``Parameters`` entries (``name : type`` over indented text) describe the arguments.
    """

    @tool
    def weather(city: str, days: int = 3, hours: int = 0) -> str:
        """Get the weather.

        Parameters
        ----------
        city : str
            The city name,
            as the user wrote it.
        days, hours : int
            How long ahead.

        Returns
        -------
        str
            The forecast.
        """
        return city

    assert weather.description == "Get the weather."
    assert _documented_properties(weather) == {
        "city": "The city name, as the user wrote it.",
        "days": "How long ahead.",
        "hours": "How long ahead.",
    }


def test_tool_google_args_below_an_underlined_heading_still_document_the_parameters() -> None:
    """R9.7: a Markdown heading (a line underlined with dashes) above a Google ``Args:``
    section does not hide its entries, and Google's ``Other Parameters:`` documents too.
    """

    @tool
    def search(query: str, limit: int = 5) -> str:
        """Search the knowledge base.

        Ranking
        -------
        Results are ranked by score.

        Args:
            query: The search query.

        Other Parameters:
            limit: How many results.
        """
        return query

    assert search.description == "Search the knowledge base."
    assert _documented_properties(search) == {
        "query": "The search query.",
        "limit": "How many results.",
    }


def test_tool_sphinx_docstring_documents_the_parameters() -> None:
    """R9.7: Sphinx ``:param name:`` fields (typed or not) describe the arguments and
    no field reaches the description.
    """

    @tool
    def weather(city: str, days: int = 3) -> str:
        """Get the weather.

        :param city: The city name,
            as the user wrote it.
        :param int days: How many days.
        :returns: the forecast
        """
        return city

    assert weather.description == "Get the weather."
    assert _documented_properties(weather) == {
        "city": "The city name, as the user wrote it.",
        "days": "How many days.",
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
def test_tool_decorator_refuses_a_recursive_type_clearly(record: type) -> None:
    """R9.7: a type that contains itself (a tree) is refused with a short TypeError naming it,
    not after recursing until the interpreter's limit.
    """

    def walk(tree: record) -> str:  # type: ignore[valid-type]
        return "x"

    walk.__annotations__["tree"] = record
    with pytest.raises(TypeError) as refused:
        tool(walk)
    message = str(refused.value)
    assert f"recursive type {record.__name__} is not supported in a tool signature" in message
    assert len(message) < 200
    assert not isinstance(refused.value.__cause__, RecursionError)


def test_a_type_used_twice_side_by_side_is_not_recursive() -> None:
    """R9.7: the same record in two places is described twice; only nesting in itself is refused."""

    @tool
    def join(left: Window, right: list[Window]) -> str:
        """Join."""
        return "x"

    properties = schema_of(join)["properties"]  # type: ignore[index]
    assert properties["right"]["items"] == properties["left"]


def test_a_partial_takes_its_hints_and_docstring_from_the_wrapped_function() -> None:
    """R9.7: ``functools.partial`` (nested too) of a function with string annotations reads
    the function's hints and docstring; the partial's signature decides the parameters, less
    the keywords it binds.
    """
    docs = tool(name="search_docs")(functools.partial(search_index, "docs"))
    short = tool(name="search_short")(functools.partial(docs.fn, limit=2))
    assert docs.description == "Search one index."
    assert schema_of(docs) == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "default": 5},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert list(schema_of(short)["properties"]) == ["query"]  # type: ignore[index]
    assert short.fn(query="q") == "docs:q:2"
