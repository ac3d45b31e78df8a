"""``NamedTuple`` parameters: an object of their fields, given to the body as the tuple (R9.7)."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

import pytest

from retinue._lossless import JsonValue
from retinue.tools import tool
from tests.unit._tool_kit import execute, schema_of

T = TypeVar("T")


class Point(NamedTuple):
    x: int
    y: int = 0


class Pair(NamedTuple, Generic[T]):
    first: T
    second: T


class Tags(NamedTuple):
    names: list[str]


# The untyped kind is the one under test.
Legacy = collections.namedtuple("Legacy", ["code", "note"], defaults=["none"])  # noqa: PYI024


def _plot(at: Point, path: list[Point], seen: set[Point]) -> str:
    return f"{at!r} {path!r} {sorted(seen)!r}"


async def test_a_named_tuple_is_an_object_of_its_fields_given_as_the_tuple() -> None:
    """R9.7: a ``NamedTuple`` is described as a dataclass is, its defaults optional, and the
    body gets instances of it, in a list and a set too, rather than a refusal as unsupported."""
    plot = tool(_plot)
    assert schema_of(plot)["$defs"] == {  # type: ignore[index]
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
            "required": ["x"],
            "additionalProperties": False,
        }
    }
    arguments: JsonValue = {"at": {"x": 1}, "path": [{"x": 2, "y": 3}], "seen": [{"x": 4}]}
    assert await execute(plot, arguments) == (
        "Point(x=1, y=0) [Point(x=2, y=3)] [Point(x=4, y=0)]",
        None,
    )


def _pair(pair: Pair[str]) -> str:
    return repr(pair)


def _legacy(entry: Legacy) -> str:
    return repr(entry)


@pytest.mark.parametrize(
    ("fn", "arguments", "said"),
    [
        (_pair, {"pair": {"first": "a", "second": "b"}}, "Pair(first='a', second='b')"),
        (_legacy, {"entry": {"code": 7}}, "Legacy(code=7, note='none')"),
    ],
)
async def test_generic_and_untyped_named_tuples_are_taken(
    fn: Callable[..., str], arguments: JsonValue, said: str
) -> None:
    """R9.7: a generic one read with its type arguments; ``collections.namedtuple``'s
    fields take any value."""
    assert await execute(tool(fn), arguments) == (said, None)


def test_a_set_of_named_tuples_holding_a_list_is_refused_when_decorated() -> None:
    """R9.7: a tuple hashes its items: one holding a list could not be a set item."""

    def _labels(tags: set[Tags]) -> str:
        return repr(tags)

    with pytest.raises(TypeError, match=r"set items must be hashable, but Tags\.names"):
        tool(_labels)


class Box(NamedTuple):
    corner: Point = Point(1, 2)


ORIGIN = Point(3, 4)


def _boxed(at: Point = ORIGIN, box: Box | None = None) -> str:
    return f"{at!r} {box!r}"


async def test_a_named_tuple_default_is_shown_as_the_object_its_schema_describes() -> None:
    """R9.7: a default a ``NamedTuple`` holds is sent as the object of its fields, which a
    model copying it is given, not as an array its own schema refuses."""
    boxed = tool(_boxed)
    schema = schema_of(boxed)
    assert schema["properties"]["at"]["default"] == {"x": 3, "y": 4}  # type: ignore[index]
    box = schema["properties"]["box"]  # type: ignore[index]
    assert box["properties"]["corner"]["default"] == {"x": 1, "y": 2}
    arguments: JsonValue = {"at": {"x": 3, "y": 4}, "box": {"corner": {"x": 1, "y": 2}}}
    assert await execute(boxed, arguments) == (
        "Point(x=3, y=4) Box(corner=Point(x=1, y=2))",
        None,
    )


def _spans(
    at: tuple[int, ...] = ORIGIN,
    ends: list[tuple[int, ...]] | None = [ORIGIN],  # noqa: B006
    by_name: dict[str, tuple[int, ...]] = {"o": ORIGIN},  # noqa: B006
    either: tuple[int, ...] | Point = ORIGIN,
) -> str:
    return f"{at!r} {ends!r} {by_name!r} {either!r}"


async def test_a_named_tuple_default_of_a_plain_tuple_is_shown_as_an_array() -> None:
    """R9.7: a ``NamedTuple`` given as the default of a ``tuple[int, ...]`` (in a list or a
    dict too) is sent as the array the schema describes, not as the object of its fields,
    which that schema refuses; a default of a union taking it as a record too stays its
    object."""
    spans = tool(_spans)
    shown = schema_of(spans)["properties"]  # type: ignore[index]
    assert shown["at"]["default"] == [3, 4]
    assert shown["ends"]["default"] == [[3, 4]]
    assert shown["by_name"]["default"] == {"o": [3, 4]}
    assert shown["either"]["default"] == {"x": 3, "y": 4}
    arguments: JsonValue = {"at": [3, 4], "ends": [[3, 4]], "by_name": {"o": [3, 4]}}
    assert await execute(spans, arguments) == (
        "(3, 4) [(3, 4)] {'o': (3, 4)} Point(x=3, y=4)",
        None,
    )
