"""Bounds that leave a decorated tool's parameter no valid value are refused when the tool
is built, never left to refuse every call (R9.3 stage 3, R9.7).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Annotated, Literal, TypedDict

import pytest
from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen, MultipleOf
from pydantic import Field

from retinue._lossless import JsonValue
from retinue.tools import tool
from tests.unit._tool_kit import execute, properties


class _Size(enum.Enum):
    SMALL = 1
    LARGE = 2


class _Pair(TypedDict):
    left: int
    right: int


def _crossed(days: Annotated[int, Ge(5), Le(3)]) -> str:
    return str(days)


def _short_long(code: Annotated[str, MinLen(5), MaxLen(3)]) -> str:
    return code


def _field_lengths(tags: Annotated[list[str], Field(min_length=4, max_length=2)]) -> str:
    return str(tags)


def _no_integer_between(days: Annotated[int, Ge(3.5), Le(3.7)]) -> str:
    return str(days)


def _open_interval(ratio: Annotated[float, Gt(3), Lt(3)]) -> str:
    return str(ratio)


def _no_multiple(days: Annotated[int, MultipleOf(10), Ge(1), Le(9)]) -> str:
    return str(days)


def _emptied_literal(kind: Annotated[Literal["a", "bb"], MinLen(3)]) -> str:
    return kind


def _emptied_enum(size: Annotated[_Size, Ge(3)]) -> str:
    return size.name


def _only_null_left(days: Annotated[int | None, Ge(5), Le(3)] = None) -> str:
    return str(days)


def _in_a_list(days: list[Annotated[int, Ge(5), Le(3)]]) -> str:
    return str(days)


def _too_few_keys(pair: Annotated[_Pair, MaxLen(1)]) -> str:
    return str(pair)


@pytest.mark.parametrize(
    ("fn", "where", "why"),
    [
        (_crossed, "_crossed(days)", "no integer meets minimum 5, maximum 3"),
        (_short_long, "_short_long(code)", "minLength 5 is above maxLength 3"),
        (_field_lengths, "_field_lengths(tags)", "minItems 4 is above maxItems 2"),
        (_no_integer_between, "_no_integer_between(days)", "no integer meets minimum 3.5"),
        (_open_interval, "_open_interval(ratio)", "no number meets exclusiveMinimum 3"),
        (_no_multiple, "_no_multiple(days)", "multipleOf 10"),
        (_emptied_literal, "_emptied_literal(kind)", "every value of its enum breaks one"),
        (_emptied_enum, "_emptied_enum(size)", "every value of its enum breaks one"),
        (_only_null_left, "_only_null_left(days)", "no integer meets minimum 5, maximum 3"),
        (_in_a_list, "_in_a_list(days)[]", "no integer meets"),
        (_too_few_keys, "_too_few_keys(pair)", "it requires 2 properties, above maxProperties 1"),
    ],
)
def test_bounds_leaving_no_value_are_refused_when_decorated(
    fn: Callable[..., object], where: str, why: str
) -> None:
    """R9.7: a parameter whose bounds no value meets would fail every call: the decorator
    refuses it, naming the function, the parameter and the bounds."""
    with pytest.raises(ValueError, match="its bounds leave no valid value") as caught:
        tool(fn)
    assert str(caught.value).startswith(f"{where}: ")
    assert why in str(caught.value)


def _edge(days: Annotated[int, Ge(3), Le(3)]) -> str:
    return str(days)


def _tenths(ratio: Annotated[float, MultipleOf(0.1), Ge(0.3), Le(0.3)]) -> str:
    return str(ratio)


def _halves(days: Annotated[int, MultipleOf(0.5), Gt(1), Lt(3)]) -> str:
    return str(days)


def _one_left(kind: Annotated[Literal["a", "bbb"], MinLen(3)]) -> str:
    return kind


@pytest.mark.parametrize(
    ("fn", "argument"),
    [(_edge, 3), (_tenths, 0.3), (_halves, 2), (_one_left, "bbb")],
)
async def test_bounds_leaving_a_value_still_build_and_take_it(
    fn: Callable[..., object], argument: JsonValue
) -> None:
    """R9.7: bounds meeting at one value, a step that divides it, an enum a bound leaves
    one value of: the tool builds, and a call with that value runs its body."""
    made = tool(fn)
    (name,) = properties(made)
    assert await execute(made, {name: argument}) == (str(argument), None)
