"""Tool schemas and argument conversion for real-world signatures (R9.7)."""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import TYPE_CHECKING, Literal

import attrs
import pytest
import typing_extensions
from pydantic import Field

from retinue._content import Text
from retinue._lossless import JsonValue, thaw_json
from retinue.tools import tool
from tests.unit._tool_kit import execute, properties

if TYPE_CHECKING:
    from retinue._content import ContentBlock


class Window(typing_extensions.TypedDict):
    """A typing_extensions TypedDict: what pydantic asks for before Python 3.12."""

    start: int
    end: typing_extensions.NotRequired[int]
    label: typing_extensions.ReadOnly[str]


Units = typing_extensions.TypeAliasType("Units", Literal["c", "f"])


def test_a_typing_extensions_typeddict_is_described_like_a_typing_one() -> None:
    """R9.7: a ``typing_extensions.TypedDict`` (its ``ReadOnly`` keys too) is an object schema."""

    def chart(window: Window) -> str:
        return repr(window)

    assert properties(tool(chart))["window"] == {
        "type": "object",
        "properties": {
            "start": {"type": "integer"},
            "end": {"type": "integer"},
            "label": {"type": "string"},
        },
        "required": ["start", "label"],
        "additionalProperties": False,
    }


def test_a_type_alias_is_described_as_its_value() -> None:
    """R9.7: a ``TypeAliasType`` (Python 3.12's ``type`` statement) stands for its value."""

    def convert(units: Units) -> str:
        return units

    assert properties(tool(convert))["units"] == {"type": "string", "enum": ["c", "f"]}


def _recursive_alias() -> object:
    """The alias of Python 3.12's ``type Nested = list[Nested] | int``, built by the backport."""
    Nested = typing_extensions.TypeAliasType("Nested", int)  # noqa: N806 - an alias's own name
    # Its value names the alias itself, which only exists once the alias does.
    object.__setattr__(Nested, "__value__", list[Nested] | int)  # type: ignore[valid-type]
    return Nested


def test_a_recursive_type_alias_is_refused_clearly() -> None:
    """R9.7: an alias that contains itself cannot be described without references."""

    def walk(node: int) -> str:
        return repr(node)

    walk.__annotations__["node"] = _recursive_alias()
    with pytest.raises(TypeError, match=r"recursive type Nested"):
        tool(walk)


def test_an_unresolvable_return_annotation_does_not_refuse_the_tool() -> None:
    """R9.7: the schema is the parameters'; a return type imported only for type checkers is not read."""

    def greet(name: str) -> tuple[ContentBlock, ...]:
        return (Text(f"hello {name}"),)

    assert properties(tool(greet)) == {"name": {"type": "string"}}


async def test_a_union_keeps_an_integer_for_its_int_member_even_after_a_float_one() -> None:
    """R9.7: ``float | int`` given an exact integer gives the body that int, not a rounded float."""

    def store(value: float | int) -> str:  # noqa: PYI041 - the order is tested
        return repr(value)

    assert await execute(tool(store), {"value": 2**53 + 1}) == (repr(2**53 + 1), None)
    assert await execute(tool(store), {"value": 2.5}) == ("2.5", None)


async def test_a_union_keeps_a_float_for_its_float_member_even_after_an_int_one() -> None:
    """R9.7: ``int | float`` given ``2.0`` gives the body the float the model wrote."""

    def store(value: int | float) -> str:  # noqa: PYI041 - the order is tested
        return repr(value)

    assert await execute(tool(store), {"value": 2.0}) == ("2.0", None)
    assert await execute(tool(store), {"value": 3}) == ("3", None)


@dataclasses.dataclass
class _Cached:
    """A record whose class-level annotation names a type imported only for type checkers."""

    key: str
    last: typing.ClassVar[ContentBlock | None] = None


@attrs.define
class _Marked:
    key: str
    seen: typing.ClassVar[ContentBlock | None] = None


@pytest.mark.parametrize("record", [_Cached, _Marked], ids=["dataclass", "attrs"])
async def test_a_record_is_described_by_its_fields_whatever_else_it_annotates(
    record: type[_Cached | _Marked],
) -> None:
    """R9.7: a ``ClassVar`` no constructor takes is not resolved with the fields, so one
    naming a type imported only for type checkers does not refuse the whole tool."""

    def look(item: _Cached) -> str:
        return item.key

    look.__annotations__["item"] = record
    defined = tool(look)
    assert properties(defined)["item"]["properties"] == {"key": {"type": "string"}}
    assert await execute(defined, {"item": {"key": "k"}}) == ("k", None)


@pytest.mark.parametrize("hint", [tuple[()], typing.Tuple[()]], ids=["tuple", "Tuple"])  # noqa: UP006 - typing's spelling is the other case
def test_an_empty_tuple_type_is_refused_as_a_fixed_length_tuple(hint: object) -> None:
    """R9.7: ``tuple[()]`` admits only the empty tuple: refused, not described as an array of
    anything."""

    def take(items: tuple[int, ...]) -> str:
        return repr(items)

    take.__annotations__["items"] = hint
    with pytest.raises(TypeError, match=r"take\(items\): fixed-length tuples are not supported"):
        tool(take)


def _tag_set(tags: list[str]) -> frozenset[str]:
    return frozenset(tag.lower() for tag in tags)


@attrs.frozen
class Labels:
    """An attrs record whose fields convert what the constructor takes."""

    tags: frozenset[str] = attrs.field(converter=_tag_set)
    extra: frozenset[str] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_tag_set)
    )
    size: int = attrs.field(default=1, converter=int)


async def test_an_attrs_field_with_a_typed_converter_is_described_by_what_it_takes() -> None:
    """R9.7: an attrs record is described by its constructor's arguments; a field with a
    converter takes the converter's argument (a ``list[str]`` here), not the field's type
    (a ``frozenset``, which JSON cannot give). An unannotated converter keeps the field's.
    """

    async def label(labels: Labels) -> str:
        return repr(labels)

    labelled = tool(label)
    assert properties(labelled)["labels"]["properties"] == {
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": ["array", "null"], "items": {"type": "string"}, "default": None},
        "size": {"type": "integer", "default": 1},
    }
    text, error = await execute(labelled, {"labels": {"tags": ["A", "b"], "extra": ["C"]}})
    assert (text, error) == (
        repr(Labels(tags=["A", "b"], extra=["C"])),  # type: ignore[arg-type]
        None,
    )


def _count(text: str) -> int:
    return int(text)


@attrs.frozen
class Tally:
    """An attrs record whose default is the stored value, not what the constructor takes."""

    count: int = attrs.field(default=0, converter=_count)
    label: str = "total"


@dataclasses.dataclass
class Mistyped:
    name: str = 0  # type: ignore[assignment]


def test_a_default_its_own_property_refuses_is_not_shown() -> None:
    """R9.7: a ``default`` is shown only when the property's schema takes it: the stored
    value of a converted attrs field (an int where a str is taken), or a default of
    another type than its hint, would lead the model to send a value refused as invalid.
    """

    def tally(
        totals: Tally,
        other: Mistyped,
        limit: str = 3,  # type: ignore[assignment]
        size: int = 2,
    ) -> str:
        return f"{totals} {other} {limit} {size}"

    shown = properties(tool(tally))
    assert shown["totals"]["properties"] == {
        "count": {"type": "string"},
        "label": {"type": "string", "default": "total"},
    }
    assert shown["other"]["properties"] == {"name": {"type": "string"}}
    assert (shown["limit"], shown["size"]) == (
        {"type": "string"},
        {"type": "integer", "default": 2},
    )


async def test_a_tool_made_in_a_function_may_name_the_types_defined_there() -> None:
    """R9.7: under ``from __future__ import annotations`` a hint is a string; a record, an
    alias or a record's field naming a type local to the function the tool is made in is
    found there, bare or with options, as it is by pydantic; a name defined nowhere is
    still refused."""

    @dataclasses.dataclass
    class Reading:
        value: float

    @attrs.frozen
    class Batch:
        readings: list[Reading]

    Mode = Literal["fast", "slow"]  # noqa: N806 - a type alias, named as one

    @tool
    def record(batch: Batch, mode: Mode = "fast") -> str:
        return f"{batch} {mode}"

    @tool(name="first")
    def first_reading(batch: Batch) -> str:
        return repr(batch.readings[0])

    arguments: JsonValue = {"batch": {"readings": [{"value": 1.5}]}}
    assert properties(record)["mode"] == {
        "type": "string",
        "enum": ["fast", "slow"],
        "default": "fast",
    }
    text, error = await execute(record, arguments)
    assert (text, error) == (f"{Batch([Reading(1.5)])} fast", None)
    assert await execute(first_reading, arguments) == (repr(Reading(1.5)), None)

    def unknown(batch: Missing) -> str:  # type: ignore[name-defined]  # noqa: F821
        return repr(batch)

    with pytest.raises(
        TypeError, match=r"cannot resolve type hints: name 'Missing' is not defined"
    ):
        tool(unknown)


Speed = Literal["slow"]


def _through_a_helper(fn: typing.Callable[..., str]) -> object:
    """A helper that makes tools: its own names are not the tool function's."""
    Gear = Literal["helper's own"]  # noqa: N806, F841 - a name the helper happens to hold
    return tool(timeout=5)(fn)


def test_a_tool_hint_resolves_in_its_own_scope_only() -> None:
    """R9.7: a local type shadows the module's, for every hint of the tool alike, as it
    would evaluated there; a tool made through a helper never reads the helper's names.
    A helper's name is not taken for the tool's, and a local type shadows the module's
    whether or not another hint of the tool fails the module's lookup."""
    Speed = Literal["fast"]  # noqa: N806, F841 - shadows the module's (read as a hint)

    @dataclasses.dataclass
    class Place:
        city: str

    @tool
    def alone(speed: Speed) -> str:
        return speed

    @tool
    def beside(speed: Speed, place: Place) -> str:
        return f"{speed} {place}"

    assert properties(alone)["speed"]["enum"] == ["fast"]
    assert properties(beside)["speed"]["enum"] == ["fast"]

    def made_elsewhere(gear: Gear) -> str:  # type: ignore[name-defined]  # noqa: F821
        return str(gear)

    with pytest.raises(TypeError, match=r"cannot resolve type hints: name 'Gear' is not defined"):
        _through_a_helper(made_elsewhere)


class _NoChoice(enum.Enum):
    """An enum without members: a base to subclass, used as a hint by mistake."""


@pytest.mark.parametrize(
    ("hint", "named"),
    [(_NoChoice, "enum _NoChoice"), (Literal[()], r"Literal\[\(\)\]")],
    ids=["enum", "Literal"],
)
def test_a_hint_with_no_values_is_refused_naming_it(hint: object, named: str) -> None:
    """R9.7: an enum without members admits no argument; it is refused naming the hint and
    the cause, not as a malformed schema (``parameters.properties.choice.type``)."""

    def pick(choice: str) -> str:
        return choice

    pick.__annotations__["choice"] = hint
    with pytest.raises(TypeError, match=rf"pick\(choice\): {named} has no values"):
        tool(pick)


class _Level(enum.StrEnum):
    LOW = "low"
    HIGH = "high"


async def test_a_mapping_key_hint_is_checked_and_converted_not_dropped() -> None:
    """R9.7: ``dict[K, V]``'s key hint is the ``propertyNames`` of the object: a pattern on
    ``str`` keys is kept, so a key it refuses never reaches the body, and a ``Literal`` or a
    str enum is taken and converted, not refused."""
    got: list[object] = []

    def weigh(
        limits: dict[typing.Annotated[str, Field(pattern="^[a-z]+$")], int],
        levels: dict[_Level, int],
    ) -> str:
        got.append((limits, levels))
        return "ok"

    defined = tool(weigh)
    assert properties(defined)["limits"] == {
        "type": "object",
        "propertyNames": {"pattern": "^[a-z]+$"},
        "additionalProperties": {"type": "integer"},
    }
    assert properties(defined)["levels"]["propertyNames"] == {"enum": ["low", "high"]}
    text, error = await execute(defined, {"limits": {"Cpu": 1}, "levels": {}})
    assert text.endswith('limits.Cpu: property name must match the pattern "^[a-z]+$"')
    assert error is not None
    assert await execute(defined, {"limits": {"cpu": 1}, "levels": {"low": 2}}) == ("ok", None)
    assert got == [({"cpu": 1}, {_Level.LOW: 2})]
    assert type(next(iter(got[0][1]))) is _Level  # type: ignore[index]


def test_a_mapping_key_hint_allowing_no_string_is_refused() -> None:
    """R9.7: a JSON object's keys are strings: an int or optional key hint is refused."""

    def count(by: dict[str, int]) -> str:
        return repr(by)

    for hint in (dict[int, int], dict[str | None, int]):
        count.__annotations__["by"] = hint
        with pytest.raises(TypeError, match=r"count\(by\): object keys must be str"):
            tool(count)


_T = typing.TypeVar("_T")
_U = typing.TypeVar("_U")


@dataclasses.dataclass
class _Box(typing.Generic[_T]):
    item: _T
    more: list[_T] = dataclasses.field(default_factory=list)


class _Page(typing.TypedDict, typing.Generic[_T]):
    items: list[_T]
    after: _T | None


@attrs.frozen
class _Pair(typing.Generic[_T, _U]):
    left: _T
    right: _Box[_U]


async def test_a_generic_record_is_described_by_its_type_arguments() -> None:
    """R9.7: ``Box[int]`` is Box's fields with its type variable read as ``int``, nested
    generics too, and the body gets the record, not a refusal as an unsupported type."""
    got: list[object] = []

    def fill(box: _Box[int], page: _Page[str], pair: _Pair[str, float]) -> str:
        got.append((box, page, pair))
        return "ok"

    defined = tool(fill)
    described = properties(defined)
    assert described["box"]["properties"]["more"] == {"type": "array", "items": {"type": "integer"}}
    assert described["page"]["properties"]["after"] == {"type": ["string", "null"]}
    assert described["pair"]["properties"]["right"]["properties"]["item"] == {"type": "number"}
    arguments: dict[str, JsonValue] = {
        "box": {"item": 1},
        "page": {"items": ["a"], "after": None},
        "pair": {"left": "l", "right": {"item": 2}},
    }
    assert await execute(defined, arguments) == ("ok", None)
    assert got == [(_Box(1), {"items": ["a"], "after": None}, _Pair("l", _Box(2.0)))]
    text, _ = await execute(defined, {**arguments, "box": {"item": "one"}})
    assert text.endswith("box.item: expected integer, got string")


@dataclasses.dataclass
class _Tree(typing.Generic[_T]):
    value: _T
    children: list[_Tree[_T]]


async def test_a_generic_record_holding_itself_is_described_once_under_defs() -> None:
    """R9.7: ``Tree[int]`` inside ``Tree[int]`` is one definition, ``_Tree_int_``, that refers
    to itself; its arguments reach the body as trees."""
    got: list[object] = []

    def walk(tree: _Tree[int]) -> str:
        got.append(tree)
        return "ok"

    defined = tool(walk)
    assert properties(defined)["tree"] == {"$ref": "#/$defs/_Tree_int_"}
    items = {"type": "array", "items": {"$ref": "#/$defs/_Tree_int_"}}
    definitions = typing.cast("dict[str, typing.Any]", thaw_json(defined.parameters))["$defs"]
    assert definitions["_Tree_int_"]["properties"]["children"] == items
    arguments: dict[str, JsonValue] = {
        "tree": {"value": 1, "children": [{"value": 2.0, "children": []}]}
    }
    assert await execute(defined, arguments) == ("ok", None)
    assert got == [_Tree(1, [_Tree(2, [])])]


class _Access(enum.IntFlag):
    READ = 1
    WRITE = 2
    RUN = 8


async def test_a_flag_takes_any_combination_of_its_members() -> None:
    """R9.7: a ``Flag`` is the integer of its members' bits: ``READ | WRITE`` (3) and none (0)
    reach the body as the flag: the schema is no enum of its members alone, which would refuse
    every combination; a bit of no member is refused."""
    got: list[object] = []

    def grant(access: _Access) -> str:
        got.append(access)
        return "ok"

    defined = tool(grant)
    assert properties(defined)["access"] == {"type": "integer", "minimum": 0, "maximum": 11}
    assert await execute(defined, {"access": 3}) == ("ok", None)
    assert await execute(defined, {"access": 0}) == ("ok", None)
    assert got == [_Access.READ | _Access.WRITE, _Access(0)]
    assert type(got[0]) is _Access
    text, error = await execute(defined, {"access": 4})
    assert text.endswith("access: must combine only the bits of _Access (11), got 4")
    assert error is not None


@dataclasses.dataclass
class _IntBox(_Box[int]):
    label: str = ""


class _StrPage(_Page[str]):
    total: int


@dataclasses.dataclass
class _Loose(typing.Generic[_T]):
    value: _T


@dataclasses.dataclass
class _Holder(typing.Generic[_T]):
    held: _T
    loose: _Loose  # type: ignore[type-arg]  # bare: its _T is none of _Holder's


def test_a_record_subclassing_a_generic_one_reads_its_base_arguments() -> None:
    """R9.7: ``class IntBox(Box[int])`` is Box's fields with ``int`` for its type variable,
    a TypedDict's too; a record inside another gets only its own type arguments."""

    def keep(box: _IntBox, page: _StrPage) -> str:
        return repr((box, page))

    described = properties(tool(keep))
    assert described["box"]["properties"]["item"] == {"type": "integer"}
    assert described["page"]["properties"]["items"] == {
        "type": "array",
        "items": {"type": "string"},
    }

    def hold(holder: _Holder[int]) -> str:
        return repr(holder)

    with pytest.raises(TypeError, match=r"hold\(holder\)\.loose\.value: unsupported type ~_T"):
        tool(hold)


@dataclasses.dataclass
class _Relabelled(_Box[int], typing.Generic[_T]):
    label: _T | None = None


def test_a_type_variable_read_as_two_types_is_refused_naming_both() -> None:
    """R9.7: ``class Relabelled(Box[int], Generic[T])`` reads ``T`` as ``int`` in its base
    and as its own argument in itself: refused naming both, rather than its fields all
    described with one reading, ``Relabelled[str]``'s ``item`` asking for a string the body
    never means to take."""

    def keep(box: _Relabelled[str]) -> str:
        return repr(box)

    with pytest.raises(TypeError, match=r"keep\(box\): _Relabelled reads the type variable ~_T"):
        tool(keep)


@dataclasses.dataclass
class _Grow(typing.Generic[_T]):
    value: _T
    deeper: _Grow[list[_T]] | None = None


def test_a_generic_record_growing_inside_itself_is_refused_as_recursive() -> None:
    """R9.7: ``Grow[T]`` holding ``Grow[list[T]]`` never ends: refused as recursive, not a
    RecursionError."""

    def grow(seed: _Grow[int]) -> str:
        return repr(seed)

    with pytest.raises(TypeError, match=r"grow\(seed\)(\.deeper){8}: recursive type _Grow"):
        tool(grow)


class _Layers(enum.Flag):
    BOTH = 3  # a member of two bits, which iterating the class leaves out
    TOP = 4
    EVERY = -1  # Python's old alias of all bits: no bits of its own


class _NoLayers(enum.Flag):
    pass


async def test_a_flag_counts_every_declared_member_and_one_with_none_is_refused() -> None:
    """R9.7: a member of several bits is part of the flag (its schema allows up to 7 and
    takes BOTH, 3), and a negative alias of all bits adds none (its -1 does not make the
    maximum -1); a flag with no members is refused when decorated, as an empty enum is,
    rather than built to fail every call."""

    def paint(layers: _Layers) -> str:
        return repr(layers)

    defined = tool(paint)
    assert properties(defined)["layers"] == {"type": "integer", "minimum": 0, "maximum": 7}
    assert await execute(defined, {"layers": 3}) == (repr(_Layers.BOTH), None)

    def none(layers: _NoLayers) -> str:
        return repr(layers)

    with pytest.raises(TypeError, match=r"none\(layers\): enum _NoLayers has no values"):
        tool(none)


class _Sized(type):
    def __call__(cls, size: int) -> object:
        return super().__call__(size)


class _Made(metaclass=_Sized):
    """Made to a size."""

    def __init__(self, *args: object) -> None:
        self.args = args

    def __repr__(self) -> str:
        return f"_Made{self.args}"


def test_a_class_made_a_tool_is_described_by_its_metaclass_call_first() -> None:
    """R9.7: as ``inspect.signature`` reads it, a metaclass's ``__call__`` says what calling
    the class takes, not its ``__init__``'s ``*args``, which would be refused."""
    assert properties(tool(_Made)) == {"size": {"type": "integer"}}


def _choose(level: Literal[_Level.LOW, "low", "high"]) -> str:
    return repr(level)


async def test_a_literal_lists_each_json_value_once_and_gives_its_first_choice() -> None:
    """R9.7: an enum member and its value, which JSON cannot tell apart, are one value of the
    ``enum``, listed once and given to the body as the first declared, not the last."""
    chosen = tool(_choose)
    assert properties(chosen)["level"] == {"type": "string", "enum": ["low", "high"]}
    assert await execute(chosen, {"level": "low"}) == ("<_Level.LOW: 'low'>", None)
