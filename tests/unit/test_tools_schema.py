"""The ``@tool`` decorator: JSON schema from type hints and their constraints (R9.7)."""

from __future__ import annotations

import dataclasses
import enum
import re
import typing
from typing import Annotated, Literal, NotRequired, TypedDict

import annotated_types
import attrs
import pytest
from pydantic import Field

from retinue._lossless import freeze_json
from retinue.tools import tool
from tests.unit._tool_kit import Window, execute, schema_of


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(TypedDict):
    x: int
    y: int
    label: NotRequired[str]


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


@dataclasses.dataclass(init=False)
class Span:
    start: int
    end: int

    def __init__(self, start: int) -> None:
        self.start, self.end = start, start + 1


@attrs.define(init=False)
class Interval:
    low: int
    high: int

    def __init__(self, low: int, width: int) -> None:
        self.__attrs_init__(low, low + width)


@attrs.define(init=False)
class Range:
    low: int
    high: int

    def __init__(self, low: int, high: int, swapped: bool = False) -> None:
        self.__attrs_init__(*((high, low) if swapped else (low, high)))


@attrs.define(init=False)
class Tagged:
    low: int
    high: int

    def __init__(self, tag: str, /, low: int, high: int) -> None:
        self.__attrs_init__(low, high)


def _tagged(t: Tagged) -> str:
    return repr(t)


@attrs.define(init=False)
class Gathered:
    low: int
    high: int

    def __init__(self, low: int, /, **rest: int) -> None:
        self.__attrs_init__(low, rest["high"])


def _gathered(g: Gathered) -> str:
    return repr(g)


def _spanned(s: Span) -> str:
    return repr(s)


def _interval(i: Interval) -> str:
    return repr(i)


@pytest.mark.parametrize(
    ("fn", "where"),
    [
        (_spanned, r"_spanned\(s\): Span's constructor takes no end by name"),
        (_interval, r"_interval\(i\): Interval takes width in its constructor as no field"),
        (_tagged, r"_tagged\(t\): Tagged takes tag in its constructor as no field"),
        (_gathered, r"_gathered\(g\): Gathered's constructor takes no low by name"),
    ],
)
def test_a_record_whose_own_init_does_not_take_its_fields_is_refused_when_decorated(
    fn: typing.Callable[..., object], where: str
) -> None:
    """R9.7: a record's fields make its schema and the body gets ``cls(**fields)``: an
    ``__init__`` of its own that takes no field the schema asks for (every call giving it
    would fail), or takes what is no field (no call would give it), is refused at
    decoration, naming it, rather than built to refuse its calls."""
    with pytest.raises(TypeError, match=where):
        tool(fn)


async def test_a_record_whose_own_init_adds_an_optional_parameter_is_built_and_given_its_fields() -> (
    None
):
    """R9.7: a parameter of a record's own ``__init__`` that is no field but has a default
    needs no value from the model: the record is built and the body gets ``cls(**fields)``,
    not refused as taking what no call would give."""

    def use(w: Range) -> str:
        return f"{w.low}..{w.high}"

    result = await execute(tool(use), {"w": {"low": 1, "high": 2}})
    assert result == ("1..2", None)


def test_a_length_bound_on_a_type_without_a_length_is_refused_when_decorated() -> None:
    """R9.7: ``min_length`` on an int says nothing the schema could check: refused at
    decoration naming the parameter, rather than ignored."""
    with pytest.raises(TypeError, match=r"count\): a length bound .* not integer"):

        @tool
        def tally(count: Annotated[int, Field(min_length=2)]) -> int:
            """Tally."""
            return count


@pytest.mark.parametrize(
    "constraint", [Field(pattern="^[0-9]+$"), re.compile("^[0-9]+$")], ids=["Field", "compiled"]
)
def test_a_pattern_on_a_type_without_strings_is_refused_when_decorated(
    constraint: object,
) -> None:
    """R9.7: a pattern on an int is checked against no value (JSON Schema applies it to
    strings only), so sent it would never be enforced: refused at decoration, as a length
    or numeric bound on the wrong type is."""

    def tally(count: int) -> int:
        return count

    tally.__annotations__["count"] = Annotated[int, constraint]
    with pytest.raises(TypeError, match=r"count\): a pattern needs a str type, not integer"):
        tool(tally)
