"""The one depth walker counts the levels of any JSON value, plain or frozen, as a recursion
would, and measures a value far deeper than Python's stack from a deep stack (R4.5)."""

from __future__ import annotations

import sys

from hypothesis import given

from retinue._lossless import JSON_LEVELS, JsonValue, deeper_than, freeze_json
from tests.strategies import json_values


def _height(value: object) -> int:
    """Levels of objects and arrays, counted the plain recursive way."""
    if isinstance(value, dict):
        return 1 + max(map(_height, value.values()), default=0)
    if isinstance(value, list | tuple):
        return 1 + max(map(_height, value), default=0)
    return 0


@given(json_values)
def test_a_value_is_deeper_than_each_limit_below_its_height_and_no_other(value: JsonValue) -> None:
    """R4.5: a value of height h is deeper than 0..h-1 levels and not than h or more."""
    height = _height(value)
    for form in (value, freeze_json(value)):
        assert [deeper_than(form, limit, JSON_LEVELS) for limit in range(height + 2)] == [
            limit < height for limit in range(height + 2)
        ]


def test_a_value_deeper_than_the_stack_is_measured_without_recursing() -> None:
    """R4.5: ten times Python's recursion limit of levels is measured, level by level."""
    levels = 10 * sys.getrecursionlimit()
    value: object = {"leaf": [1, 2]}
    for _ in range(levels - 2):
        value = [value, "sibling"]
    assert deeper_than(value, levels - 1, JSON_LEVELS)
    assert not deeper_than(value, levels, JSON_LEVELS)
