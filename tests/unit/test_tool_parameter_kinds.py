"""``@tool`` parameters a JSON object fills by name: positional-only, ``**kwargs``, sets (R9.7)."""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import re
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict, Unpack

import attrs
import pytest
import typing_extensions

from retinue._lossless import thaw_json
from retinue.tools import Tool, ToolContext, tool
from tests.unit._tool_kit import execute, properties


def schema_of(definition: Tool) -> dict[str, Any]:
    schema = thaw_json(definition.parameters)
    assert isinstance(schema, dict)
    return schema


# -- positional-only parameters ---------------------------------------------------------


def _span(start: int, stop: int = 10, step: int = 1, /, *, label: str = "") -> str:
    """A range, labelled.

    Args:
        start: First value.
        stop: End value.
    """
    return f"{label}{list(range(start, stop, step))}"


async def test_positional_only_parameters_are_filled_by_name_and_passed_by_position() -> None:
    """R9.7: the model names a positional-only parameter; the body gets it by position,
    an omitted one before a given one its default."""
    span = tool(_span)

    assert schema_of(span)["required"] == ["start"]
    assert properties(span)["stop"] == {
        "type": "integer",
        "description": "End value.",
        "default": 10,
    }
    assert await execute(span, {"start": 1, "step": 3}) == ("[1, 4, 7]", None)
    assert await execute(span, {"start": 8, "label": "x"}) == ("x[8, 9]", None)
    assert span.fn is _span


async def test_an_async_positional_only_body_and_a_partial_filling_one_by_position() -> None:
    """R9.7: a partial's positional value stays first; the rest are filled by name."""

    async def scale(factor: int, value: int, /, ctx: ToolContext) -> str:
        return f"{ctx.call_id}:{factor * value}"

    assert await execute(tool(scale), {"factor": 2, "value": 5}) == ("c1:10", None)
    assert await execute(tool(name="scale")(functools.partial(scale, 3)), {"value": 5}) == (
        "c1:15",
        None,
    )


def _introduce(greeting: str, /, self: str) -> str:
    return f"{greeting}, I am {self}"


async def test_a_parameter_named_self_beside_a_positional_only_one_is_passed_on() -> None:
    """R9.7: the adapter passing positional-only parameters by position takes every other
    argument by name, one named ``self`` too."""
    assert await execute(tool(_introduce), {"greeting": "hello", "self": "ada"}) == (
        "hello, I am ada",
        None,
    )


# -- **kwargs ---------------------------------------------------------------------------


def _reading(station: str, **values: float) -> str:
    """Readings of a station.

    Args:
        station: Its name.
        values: Each reading by its name.
    """
    return f"{station} {sorted(values.items())}"


async def test_var_keyword_parameter_takes_every_other_property_checked_by_its_type() -> None:
    """R9.7: ``**values: float`` is ``additionalProperties`` of a number; those keys reach it."""
    reading = tool(_reading)

    assert schema_of(reading)["additionalProperties"] == {
        "type": "number",
        "description": "Each reading by its name.",
    }
    assert await execute(reading, {"station": "Oslo", "wind": 3, "temp": 1.5}) == (
        "Oslo [('temp', 1.5), ('wind', 3.0)]",
        None,
    )
    text, error = await execute(reading, {"station": "Oslo", "wind": "high"})
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert "wind: expected number, got string" in text


async def test_an_untyped_var_keyword_parameter_takes_any_property() -> None:
    """R9.7: a bare ``**extra`` leaves ``additionalProperties`` out: any value is taken."""

    def note(text: str, **extra: object) -> str:
        return f"{text} {extra}"

    noted = tool(note)
    assert "additionalProperties" not in schema_of(noted)
    assert await execute(noted, {"text": "t", "tags": ["a"]}) == ("t {'tags': ['a']}", None)


@pytest.mark.parametrize("key", ["ctx", "secret"])
async def test_var_keywords_never_fill_the_context_or_a_partials_keyword(key: str) -> None:
    """R9.7: a key naming the injected context or a partial's keyword is refused, not passed."""

    def lookup(city: str, secret: str, ctx: ToolContext, **options: str) -> str:
        return f"{city} {secret} {ctx.call_id} {options}"

    looked_up = tool(name="lookup")(functools.partial(lookup, secret="s3"))
    assert await execute(looked_up, {"city": "Oslo", "unit": "C"}) == (
        "Oslo s3 c1 {'unit': 'C'}",
        None,
    )
    text, error = await execute(looked_up, {"city": "Oslo", key: "forged"})
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert f"{key}: unexpected property" in text


def test_var_keywords_name_the_keys_they_refuse_where_the_model_reads_them() -> None:
    """R9.7: the schema of the other properties says which names are refused (the context's,
    a partial's keyword), in its description: the model is told before it sends one."""

    def lookup(city: str, secret: str, ctx: ToolContext, **options: str) -> str:
        """Look a city up.

        Args:
            city: The city.
            options: Extra settings.
        """
        return f"{city} {secret} {ctx.call_id} {options}"

    def note(text: str, ctx: ToolContext, **extra: object) -> str:
        return f"{text} {ctx.call_id} {extra}"

    looked_up = tool(name="lookup")(functools.partial(lookup, secret="s3"))
    assert schema_of(looked_up)["additionalProperties"] == {
        "type": "string",
        "description": 'Extra settings. Never named "ctx" or "secret".',
    }
    assert schema_of(tool(note))["additionalProperties"] == {"description": 'Never named "ctx".'}
    assert schema_of(tool(name="f")(_Filters().by_method))["additionalProperties"] == {
        "type": "integer",
        "description": 'Never named "self".',
    }


class _Filters:
    """Tools taking ``**kwargs`` whose instance or class Python fills in."""

    def by_method(self, **filters: int) -> str:
        return f"method {filters}"

    @classmethod
    def by_class(cls, **filters: int) -> str:
        return f"class {filters}"

    def __call__(self, **filters: int) -> str:
        return f"object {filters}"


@pytest.mark.parametrize(
    ("target", "slot"),
    [(_Filters().by_method, "self"), (_Filters.by_class, "cls"), (_Filters(), "self")],
    ids=["bound method", "class method", "callable object"],
)
async def test_var_keywords_never_fill_the_instance_or_class_python_passes(
    target: Callable[..., str], slot: str
) -> None:
    """R9.2, R9.7: a key naming the ``self`` or ``cls`` Python fills is refused as an
    invalid argument, not passed on to fail as 'got multiple values for argument'."""
    filtering = tool(name="filtering")(target)
    assert (await execute(filtering, {"size": 3}))[0].endswith("{'size': 3}")
    text, error = await execute(filtering, {slot: 3})
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert f"{slot}: unexpected property" in text


class _Units(TypedDict):
    unit: str
    digits: NotRequired[int]


class _OldUnits(typing_extensions.TypedDict):
    unit: str


async def test_var_keywords_unpacking_a_typeddict_are_its_keys_as_properties() -> None:
    """R9.7: ``**options: Unpack[TD]`` (PEP 692) advertises the TypedDict's keys, checked and
    required as the TypedDict says, and passes them as keywords; any other key is refused."""

    def convert(value: float, **options: Unpack[_Units]) -> str:
        """Convert a value.

        Args:
            value: The value.
            unit: The unit to convert to.
        """
        return f"{value} {sorted(options.items())}"

    converting = tool(convert)
    assert schema_of(converting) == {
        "type": "object",
        "properties": {
            "value": {"type": "number", "description": "The value."},
            "unit": {"type": "string", "description": "The unit to convert to."},
            "digits": {"type": "integer"},
        },
        "required": ["value", "unit"],
        "additionalProperties": False,
    }
    assert await execute(converting, {"value": 1, "unit": "C", "digits": 2}) == (
        "1.0 [('digits', 2), ('unit', 'C')]",
        None,
    )
    text, error = await execute(converting, {"value": 1, "digits": 2, "scale": 3})
    assert error is not None
    assert "unit: missing required property" in text

    def old(**options: typing_extensions.Unpack[_OldUnits]) -> None: ...

    assert schema_of(tool(old))["required"] == ["unit"]


async def test_a_typeddict_key_a_partial_binds_is_neither_shown_nor_accepted() -> None:
    """R9.7: like a bound parameter, a key of ``**options: Unpack[TD]`` that a partial binds
    is left out of the schema (a required one is filled by the partial) and refused if sent:
    the partial's value is not the model's to override."""

    def convert(value: float, **options: Unpack[_Units]) -> str:
        return f"{value} {sorted(options.items())}"

    fixed = tool(name="convert")(functools.partial(convert, unit="K"))
    assert schema_of(fixed) == {
        "type": "object",
        "properties": {"value": {"type": "number"}, "digits": {"type": "integer"}},
        "required": ["value"],
        "additionalProperties": False,
    }
    assert await execute(fixed, {"value": 1, "digits": 2}) == (
        "1.0 [('digits', 2), ('unit', 'K')]",
        None,
    )
    text, error = await execute(fixed, {"value": 1, "unit": "C"})
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert "unit: unexpected property" in text
    nested = tool(name="convert")(functools.partial(functools.partial(convert, digits=3), unit="K"))
    assert schema_of(nested)["properties"] == {"value": {"type": "number"}}


def test_var_keywords_unpacking_anything_but_a_typeddicts_own_keys_are_refused() -> None:
    """R9.7: ``Unpack`` of another type, or of a key that is also a parameter, is refused."""

    def bad(**options: Unpack[dict[str, int]]) -> None: ...  # type: ignore[misc]
    def twice(unit: str, **options: Unpack[_Units]) -> None: ...  # type: ignore[misc]

    with pytest.raises(TypeError, match="may unpack only a TypedDict"):
        tool(bad)
    with pytest.raises(TypeError, match="key 'unit', which is also a parameter"):
        tool(twice)


# -- sets -------------------------------------------------------------------------------


async def test_set_parameters_are_arrays_of_unique_items_given_as_sets() -> None:
    """R9.7: ``set[T]`` and ``frozenset[T]`` are arrays with ``uniqueItems``, converted."""

    def tagged(tags: set[str], ids: frozenset[int], seen: collections.abc.Set[int]) -> str:
        assert isinstance(tags, set)
        assert isinstance(ids, frozenset)
        assert isinstance(seen, frozenset)
        return f"{sorted(tags)} {sorted(ids)} {sorted(seen)}"

    tagging = tool(tagged)
    assert properties(tagging)["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "uniqueItems": True,
    }
    assert await execute(tagging, {"tags": ["b", "a"], "ids": [2.0, 1], "seen": []}) == (
        "['a', 'b'] [1, 2] []",
        None,
    )
    text, error = await execute(tagging, {"tags": ["a", "a"], "ids": [], "seen": []})
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert "tags" in text


async def test_set_items_equal_only_once_converted_are_refused_naming_the_parameter() -> None:
    """R9.7: ``1`` and ``true`` differ in JSON but not in a Python set: refused, not merged."""

    def flags(values: set[bool | int]) -> str:
        return str(sorted(values))

    text, error = await execute(tool(flags), {"values": [1, True]})
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert "values: array items must be unique" in text


async def test_set_items_equal_only_once_converted_are_named_by_their_indices() -> None:
    """R9.3: of items equal only once converted (``[1, 2]`` and ``[2, 1]`` as frozensets), the
    refusal names which item repeats which, as a JSON duplicate's does, not the set alone."""

    def groups(sets: list[set[frozenset[int]]]) -> str:
        return str(len(sets))

    text, error = await execute(tool(groups), {"sets": [[[1, 2], [3], [2, 1]]]})
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert text.endswith(
        "sets[0]: array items must be unique, as items of a set, but [2] equals [0] once converted"
    )


@dataclasses.dataclass
class _Mutable:
    x: int


def test_sets_of_items_that_may_be_unhashable_are_refused_when_decorated() -> None:
    """R9.7: a set of lists, of mutable records or of unknown items could never be built."""

    def of_lists(items: set[tuple[list[int], ...]]) -> None: ...
    def of_records(items: frozenset[_Mutable]) -> None: ...
    def bare(items: set) -> None: ...  # type: ignore[type-arg]

    cases: list[tuple[Callable[..., None], str]] = [
        (of_lists, "must be hashable"),
        (of_records, "_Mutable is not hashable"),
        (bare, "needs its item type"),
    ]
    for fn, fragment in cases:
        with pytest.raises(TypeError, match=fragment):
            tool(fn)


@attrs.frozen
class _TaggedAttrs:
    name: str
    tags: list[str]


@dataclasses.dataclass(frozen=True)
class _TaggedData:
    name: str
    tags: list[str]


@dataclasses.dataclass(frozen=True)
class _Holder:
    inner: _TaggedData


@attrs.frozen
class _TaggedByName:
    name: str
    tags: list[str]

    def __hash__(self) -> int:
        return hash(self.name)


@dataclasses.dataclass(frozen=True)
class _Labelled:
    name: str
    tags: list[str] = dataclasses.field(compare=False)
    ids: tuple[int, ...] = ()


def test_sets_of_frozen_records_with_a_list_field_are_refused_when_decorated() -> None:
    """R9.7: the hash attrs or dataclasses generate for a frozen record hashes its fields, so a
    list field makes every item unhashable: refused naming the field, not left to fail each
    call as the model's invalid arguments."""

    def of_attrs(items: set[_TaggedAttrs]) -> None: ...
    def of_dataclasses(items: frozenset[_TaggedData]) -> None: ...
    def nested(items: set[_Holder | None]) -> None: ...

    cases: list[tuple[Callable[..., None], str]] = [
        (of_attrs, "_TaggedAttrs.tags: list[str] may hold lists"),
        (of_dataclasses, "_TaggedData.tags: list[str] may hold lists"),
        (nested, "_Holder.inner: _TaggedData.tags: list[str] may hold lists"),
    ]
    for fn, fragment in cases:
        with pytest.raises(
            TypeError, match=re.escape(f"set items must be hashable, but {fragment}")
        ):
            tool(fn)


async def test_sets_of_records_hashing_no_list_are_given_as_sets() -> None:
    """R9.7: a hand-written ``__hash__`` is trusted, and a field left out of the generated hash
    may hold a list: such records are set items."""

    def pick(named: set[_TaggedByName], labelled: frozenset[_Labelled]) -> str:
        return f"{sorted(n.name for n in named)} {sorted(item.name for item in labelled)}"

    text, error = await execute(
        tool(pick),
        {
            "named": [{"name": "a", "tags": ["x"]}],
            "labelled": [{"name": "b", "tags": ["y"], "ids": [1]}],
        },
    )
    assert (text, error) == ("['a'] ['b']", None)


# A hand-written __hash__ compiled by exec, as dataclasses compiles the ones it generates.
_BY_NAME_SOURCE = "def __hash__(self):\n    return hash(self.name)\n"


@dataclasses.dataclass(frozen=True)
class _ExecHashed:
    name: str
    tags: list[str]

    exec(_BY_NAME_SOURCE)  # defines __hash__ in the class namespace


async def test_a_hand_written_hash_compiled_by_exec_is_trusted() -> None:
    """R9.7: a frozen dataclass's own ``__hash__`` compiled from a string, as dataclasses
    compiles the hash it generates, is still trusted: its list field is hashed by nothing,
    so its values are set items."""

    def pick(named: set[_ExecHashed]) -> str:
        return str(sorted(item.name for item in named))

    text, error = await execute(tool(pick), {"named": [{"name": "a", "tags": ["x"]}]})
    assert (text, error) == ("['a']", None)


def test_a_set_default_is_shown_as_a_sorted_array() -> None:
    """R9.7: a set's default is JSON once sorted, the same in every process (enum members by value)."""

    def pick(
        tags: frozenset[str] = frozenset({"b", "c", "a"}),
        ids: set[int] | None = None,
        flags: frozenset[int | str] = frozenset({2, "x", 1}),
    ) -> None: ...

    advertised = properties(tool(pick))
    assert advertised["tags"]["default"] == ["a", "b", "c"]
    assert advertised["ids"]["default"] is None
    assert advertised["flags"]["default"] == [1, 2, "x"]


_T = typing_extensions.TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class _Tagged(typing_extensions.Generic[_T]):
    tag: _T


async def test_a_generic_frozen_record_is_a_set_item_when_its_arguments_hash() -> None:
    """R9.7: ``frozenset[Tagged[int]]`` hashes (its field is an int), and the body gets the
    records; ``Tagged[list[int]]`` would hash by raising and is refused."""
    got: list[object] = []

    def label(tags: frozenset[_Tagged[int]]) -> str:
        got.append(tags)
        return "ok"

    assert await execute(tool(label), {"tags": [{"tag": 1}, {"tag": 2}]}) == ("ok", None)
    assert got == [frozenset({_Tagged(1), _Tagged(2)})]
    label.__annotations__["tags"] = frozenset[_Tagged[list[int]]]
    with pytest.raises(TypeError, match=r"must be hashable, but _Tagged\.tag: list\[int\]"):
        tool(label)


class _Options(TypedDict, typing_extensions.Generic[_T]):
    unit: _T


async def test_var_keywords_unpacking_a_generic_typeddict_read_its_arguments() -> None:
    """R9.7: ``**options: Unpack[Options[int]]`` advertises Options' keys with its type
    variable read as ``int``, not refused as no TypedDict."""

    def convert(**options: Unpack[_Options[int]]) -> str:
        return repr(options)

    converting = tool(convert)
    assert properties(converting) == {"unit": {"type": "integer"}}
    assert await execute(converting, {"unit": 2}) == ("{'unit': 2}", None)
