"""Records a tool's parameters use more than once, described once under ``$defs`` (R9.7)."""

from __future__ import annotations

import collections
import dataclasses
import json
import typing
from typing import Annotated, Any

import annotated_types
import attrs
import pytest

from retinue._lossless import JsonValue
from retinue.tools import _hashable, tool
from tests.unit import _tool_kit
from tests.unit._tool_kit import execute, properties, schema_of

_T = typing.TypeVar("_T")


def _doubling(levels: int, *, frozen: bool = False) -> type[object]:
    """A record of *levels* levels, each holding the next one twice; the last holds an int."""
    last = f"Level{levels - 1}"
    inner: type[object] = dataclasses.make_dataclass(last, [("leaf", int)], frozen=frozen)
    for level in reversed(range(levels - 1)):
        fields = [("left", inner), ("right", inner)]
        inner = dataclasses.make_dataclass(f"Level{level}", fields, frozen=frozen)
    return inner


async def test_a_record_held_twice_at_each_level_is_described_once_per_level() -> None:
    """R9.7: each record of 15 levels, each holding the next one twice, is described once and
    referred to, not written out at each use in a schema of megabytes."""
    got: list[object] = []

    def walk(tree: int) -> str:
        got.append(tree)
        return "ok"

    walk.__annotations__["tree"] = _doubling(15)
    defined = tool(walk)
    schema = typing.cast("dict[str, typing.Any]", schema_of(defined))
    assert len(json.dumps(schema)) < 5_000
    assert sorted(schema["$defs"]) == sorted(f"Level{level}" for level in range(1, 15))
    assert schema["properties"]["tree"]["properties"]["left"] == {"$ref": "#/$defs/Level1"}
    assert schema["$defs"]["Level13"]["properties"]["right"] == {"$ref": "#/$defs/Level14"}
    leaf: JsonValue = {"leaf": 7}
    for _ in range(14):
        leaf = {"left": leaf, "right": leaf}
    assert await execute(defined, {"tree": leaf}) == ("ok", None)
    assert typing.cast("typing.Any", got[0]).right.left.right.left.right.left.left.right


@attrs.frozen
class Window:
    """A record named as ``_tool_kit.Window`` is."""

    height: int


@attrs.frozen
class _Box(typing.Generic[_T]):
    item: _T


def test_records_of_one_name_get_definitions_of_their_own() -> None:
    """R9.7: two classes of one name from two modules, and one generic record given two
    arguments, are told apart by their definitions' names, the module's when needed."""

    @tool
    def lay(
        a: Window,
        b: Window,
        c: _tool_kit.Window,
        d: _tool_kit.Window,
        e: _Box[int],
        f: _Box[int],
        g: _Box[str],
        h: _Box[str],
    ) -> str:
        """Lay."""
        return "x"

    schema = typing.cast("dict[str, typing.Any]", schema_of(lay))
    ours, kits = "tests_unit_test_tool_shared_records_Window", "tests_unit__tool_kit_Window"
    assert sorted(schema["$defs"]) == sorted([ours, kits, "_Box_int_", "_Box_str_"])
    refs = {name: p["$ref"] for name, p in schema["properties"].items()}
    assert refs["b"] == f"#/$defs/{ours}"
    assert refs["d"] == f"#/$defs/{kits}"
    assert refs["f"] == "#/$defs/_Box_int_"
    assert refs["h"] == "#/$defs/_Box_str_"
    assert schema["$defs"]["_Box_str_"]["properties"]["item"] == {"type": "string"}
    assert "title" in schema["$defs"][kits]["properties"]  # its own fields, not ours


@dataclasses.dataclass
class _Point:
    x: int
    y: int = 0


@dataclasses.dataclass
class _Tag:
    label: str


async def test_references_convert_and_refuse_as_records_written_out_do() -> None:
    """R9.7: arguments of a record referred to reach the body as the record, a union's
    member and an optional one too, and a wrong one is refused at its field's path."""
    got: list[object] = []

    @tool
    def route(
        home: _Point,
        stops: list[_Point | _Tag],
        work: Annotated[_Point | None, "Where the day ends."] = None,
    ) -> str:
        """Route.

        Args:
            home: Where the day starts.
        """
        got.append((home, stops, work))
        return "ok"

    described = properties(route)
    assert described["home"] == {"$ref": "#/$defs/_Point", "description": "Where the day starts."}
    assert described["work"] == {
        "anyOf": [{"$ref": "#/$defs/_Point"}, {"type": "null"}],
        "description": "Where the day ends.",
        "default": None,
    }
    arguments: dict[str, JsonValue] = {
        "home": {"x": 1},
        "stops": [{"x": 2.0, "y": 3}, {"label": "shop"}],
        "work": {"x": 4},
    }
    assert await execute(route, arguments) == ("ok", None)
    assert got == [(_Point(1), [_Point(2, 3), _Tag("shop")], _Point(4))]
    text, error = await execute(route, {**arguments, "stops": [{"x": 1}, {"x": "two"}]})
    assert error is not None
    assert text.endswith("stops[1].x: expected integer, got string")


async def test_a_refusal_deep_in_the_arguments_converts_each_part_once() -> None:
    """R9.7: a value refused ten levels down is converted once and its refusal placed as it
    passes up, not converted again at each level to find where (2**11 checks for one)."""
    checked: list[object] = []

    def positive(value: int) -> bool:
        checked.append(value)
        return value > 0

    hint: object = Annotated[int, annotated_types.Predicate(positive)]
    value: JsonValue = -1
    for _ in range(10):
        hint = list[hint]  # type: ignore[valid-type]
        value = [value]

    def nest(deep: int) -> str:
        return "ok"

    nest.__annotations__["deep"] = hint
    text, error = await execute(tool(nest), {"deep": value})
    assert error is not None
    assert text.endswith(f"deep{'[0]' * 10}: must satisfy {positive.__qualname__}, got -1")
    assert checked == [-1]


_SIZES_CHECKED: list[int] = []


def _positive_size(size: int) -> bool:
    _SIZES_CHECKED.append(size)
    return size > 0


@dataclasses.dataclass
class _Twig:
    size: Annotated[int, annotated_types.Predicate(_positive_size)]
    shoots: list[_Twig | _Stem]


@dataclasses.dataclass
class _Stem:
    size: Annotated[int, annotated_types.Predicate(_positive_size)]
    shoots: list[_Twig | _Stem]


async def test_a_union_tries_each_member_on_a_part_once() -> None:
    """R9.7: two members of a union taking a tree each level, and both refusing a part ten
    levels down, tried that part 2**11 times; each member refuses each part once."""

    def grow(root: _Twig) -> str:
        return "ok"

    defined = tool(grow)
    tree: JsonValue = {"size": -1, "shoots": []}
    for _ in range(10):
        tree = {"size": 1, "shoots": [tree]}
    _SIZES_CHECKED.clear()
    text, error = await execute(defined, {"root": tree})
    assert error is not None
    assert text.endswith(f"root{'.shoots[0]' * 10}.size: must satisfy _positive_size, got -1")
    assert _SIZES_CHECKED.count(-1) <= 2


def test_a_set_of_records_held_twice_at_each_level_is_checked_hashable_once_per_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R9.7: a set's items must be hashable, checked through each record's fields: in 17
    levels of a frozen record holding the next one twice, each record is checked once, not
    at each use (2**17 checks, which take seconds)."""
    checked: list[str] = []
    check_fields = _hashable._unhashable_field

    def counting(record: type, *args: Any) -> str | None:
        checked.append(record.__name__)
        return check_fields(record, *args)

    monkeypatch.setattr(_hashable, "_unhashable_field", counting)

    def gather(trees: int) -> str:
        return "ok"

    gather.__annotations__["trees"] = set[_doubling(17, frozen=True)]  # type: ignore[misc]
    defined = tool(gather)
    assert properties(defined)["trees"]["uniqueItems"] is True
    # Once per pass of the schema's build: a second pass describes the shared records.
    counts = collections.Counter(checked)
    assert sorted(counts) == sorted(f"Level{level}" for level in range(17))
    assert max(counts.values()) <= 2


@attrs.frozen
class _Nested(typing.Generic[_T]):
    item: _T
    alt: typing.Optional["_Nested[list[int]]"] = None


@attrs.frozen
class _Grow(typing.Generic[_T]):
    item: _T
    more: typing.Optional["_Grow[list[_T]]"] = None


def test_a_set_of_a_generic_record_holding_itself_otherwise_is_checked_through_it() -> None:
    """R9.7: ``_Nested[list[int]]`` inside ``_Nested[int]`` is another record, whose list
    field makes a set of them unhashable: refused when decorated, rather than built to fail
    each call holding one."""

    def gather(boxes: int) -> str:
        return "ok"

    gather.__annotations__["boxes"] = set[_Nested[int]]
    with pytest.raises(TypeError, match=r"set items must be hashable, but _Nested\.alt"):
        tool(gather)


def test_a_set_of_a_generic_record_growing_inside_itself_is_refused() -> None:
    """R9.7: a record whose field holds it with a larger argument is refused as it grows,
    before the hashability check could follow it without end."""

    def gather(trees: int) -> str:
        return "ok"

    gather.__annotations__["trees"] = set[_Grow[int]]
    with pytest.raises(TypeError, match="_Grow"):
        tool(gather)


class _Tree(typing.TypedDict):
    name: str
    leaves: typing.NotRequired[list[_Leaf]]


class _Leaf(typing.NamedTuple):
    label: str
    sub: _Tree = {"name": "x"}


def test_a_default_inside_a_record_that_holds_itself_is_shown() -> None:
    """R9.7: a field's default that reaches back into the record being described, still
    unfinished under ``$defs``, is checked against the finished one: a valid one is shown."""

    def grow(tree: _Tree) -> str:
        return f"{tree}"

    definitions = typing.cast("dict[str, Any]", schema_of(tool(grow)))["$defs"]
    leaf = definitions["_Tree"]["properties"]["leaves"]["items"]
    assert leaf["properties"]["sub"] == {"$ref": "#/$defs/_Tree", "default": {"name": "x"}}
