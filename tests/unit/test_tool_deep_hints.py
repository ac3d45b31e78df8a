"""Type hints nested past what Python's stack holds are refused when the tool is built, as a
``TypeError`` naming the tool and the parameter (R9.7)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, TypedDict

import pytest

from retinue._lossless import MAX_JSON_DEPTH
from retinue.tools import Tool, tool

# Deeper than the schema's JSON allows, and than the stack holds while it is described.
_LEVELS = 400


def _lists(inner: object) -> object:
    return list[inner]  # type: ignore[valid-type]


def _mappings(inner: object) -> object:
    return dict[str, inner]  # type: ignore[valid-type]


def _optional_lists(inner: object) -> object:
    return list[inner | None]  # type: ignore[operator, valid-type]


def _described(inner: object) -> object:
    return Annotated[list[inner], "a level"]  # type: ignore[valid-type]


def _records(inner: object) -> object:
    return dataclasses.make_dataclass("Level", [("inner", inner)])


def _nested(wrap: Callable[[object], object], levels: int = _LEVELS) -> object:
    hint: object = int
    for _ in range(levels):
        hint = wrap(hint)
    return hint


@pytest.mark.parametrize("wrap", [_lists, _mappings, _optional_lists, _described, _records])
def test_a_hint_nested_past_the_stack_is_refused_naming_the_tool_and_parameter(
    wrap: Callable[[object], object],
) -> None:
    """R9.7: a hint nested hundreds of levels deep is refused with a ``TypeError`` that names
    the tool and the parameter, not a ``RecursionError`` out of the decorator."""

    def deep(values: object) -> str:
        return "never"

    deep.__annotations__["values"] = _nested(wrap)
    with pytest.raises(TypeError, match=r"deep\(values\): its type hint is nested too deeply"):
        tool(deep)


def test_an_unpacked_typed_dict_nested_past_the_stack_is_refused_naming_the_parameter() -> None:
    """R9.7: so is a key of ``**kwargs: Unpack[TD]`` nested as deep."""

    class Keys(TypedDict):
        values: int

    Keys.__annotations__["values"] = _nested(_lists)

    def deep(**kwargs: typing.Unpack[Keys]) -> str:
        return "never"

    with pytest.raises(TypeError, match=r"deep\(kwargs\): its type hint is nested too deeply"):
        tool(deep)


def test_a_hint_whose_schema_nests_past_json_is_refused_naming_the_tool_and_parameter() -> None:
    """R9.7: a hint the stack holds, but whose schema would nest past what a JSON value may,
    is refused naming the tool and the parameter, not by the schema's path alone
    (``parameters.properties.values.items...``)."""

    def deep(values: object) -> str:
        return "never"

    deep.__annotations__["values"] = _nested(_lists, MAX_JSON_DEPTH)
    refused = r"\.deep\(values\): its type hint is nested too deeply to describe \(its schema"
    with pytest.raises(TypeError, match=refused):
        tool(deep)
    deep.__annotations__["values"] = _nested(_lists, MAX_JSON_DEPTH - 3)
    assert tool(deep).name == "deep"


def _shared(levels: int) -> object:
    """A pair of one record, described once under ``$defs``, whose field nests *levels* lists."""
    leaf = dataclasses.make_dataclass("Leaf", [("values", _nested(_lists, levels))])
    return dataclasses.make_dataclass("Pair", [("left", leaf), ("right", leaf)])


def _chained(levels: int) -> object:
    """A pair of a record, under ``$defs``, holding twice the deep record ``_shared`` pairs."""
    leaf = dataclasses.make_dataclass("Leaf", [("values", _nested(_lists, levels))])
    middle = dataclasses.make_dataclass("Middle", [("left", leaf), ("right", leaf)])
    return dataclasses.make_dataclass("Pair", [("left", middle), ("right", middle)])


# The most lists the record's field may nest: its schema sits as deep as a parameter's, and
# holds its properties' object around the field's, two levels more than a parameter's own.
_DEFINITION_LEVELS = MAX_JSON_DEPTH - 5


def _refused_one_level_past(
    deep: Callable[..., str], hint: Callable[[int], object], deepest: int
) -> Tool:
    """The tool of *deep* with its ``values`` hinted *deepest* levels deep, once the same
    function hinted one level deeper is refused naming ``deep(values)``."""
    deep.__annotations__["values"] = hint(deepest + 1)
    refused = r"\.deep\(values\): its type hint is nested too deeply to describe \(its schema"
    with pytest.raises(TypeError, match=refused):
        tool(deep)
    deep.__annotations__["values"] = hint(deepest)
    return tool(deep)


@pytest.mark.parametrize("hint", [_shared, _chained], ids=["referred", "referred-through-another"])
def test_a_record_under_defs_nested_past_json_is_refused_naming_the_tool_and_parameter(
    hint: Callable[[int], object],
) -> None:
    """R9.7: a record described once under ``$defs``, whose schema would nest past what a
    JSON value may, is refused naming the tool and the parameter that refers to it, not by
    the schema's path alone (``parameters.$defs.Leaf.properties...``)."""

    def deep(count: int, values: object, more: int) -> str:
        return "never"

    described = _refused_one_level_past(deep, hint, _DEFINITION_LEVELS).parameters["$defs"]
    assert isinstance(described, Mapping)
    assert "Leaf" in described


def _own_lists(levels: int) -> object:
    return _nested(_lists, levels)


# A **kwargs schema is the parameters' additionalProperties: one level less deep than a
# property's, so its own lists may nest one more; a record it refers to sits as deep as for
# any parameter.
@pytest.mark.parametrize(
    ("hint", "deepest"),
    [(_own_lists, MAX_JSON_DEPTH - 2), (_shared, _DEFINITION_LEVELS)],
    ids=["own-lists", "referred-record"],
)
def test_a_keywords_hint_whose_schema_nests_past_json_is_refused_naming_the_parameter(
    hint: Callable[[int], object], deepest: int
) -> None:
    """R9.7: so is the hint of ``**kwargs``, named as its parameter, not by the schema's path
    alone (``parameters.additionalProperties...``)."""

    def deep(count: int, **values: object) -> str:
        return "never"

    assert _refused_one_level_past(deep, hint, deepest).name == "deep"


@pytest.mark.parametrize("reference", ["#/$defs/Leaf", "#/$defs/Unknown"])
def test_a_default_holding_a_reference_is_not_taken_for_the_deep_record(reference: str) -> None:
    """R9.7: a ``$ref`` in a default is data, not a schema: the refusal of a record nested
    past JSON names the parameter referring to it, not the parameter whose default holds
    the string, and is no ``KeyError`` on a name no record has."""

    def deep(*, options: dict[str, str] | None = None, values: object) -> str:
        return "never"

    deep.__kwdefaults__ = {"options": {"$ref": reference}}
    deep.__annotations__["values"] = _shared(_DEFINITION_LEVELS + 1)
    refused = r"\.deep\(values\): its type hint is nested too deeply to describe \(its schema"
    with pytest.raises(TypeError, match=refused):
        tool(deep)
