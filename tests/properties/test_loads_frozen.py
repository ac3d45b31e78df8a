"""Decoding tool arguments straight to frozen JSON equals decoding, then freezing (R1.6, R9.6)."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

from retinue._errors import InvalidJsonError
from retinue._lossless import FrozenDict, JsonValue, freeze_json, loads_frozen
from retinue.loop import parse_arguments
from tests.strategies import json_values


def _frozen_all_the_way(value: JsonValue) -> bool:
    if isinstance(value, list):
        return False
    if isinstance(value, FrozenDict):
        return all(_frozen_all_the_way(item) for item in value.values())
    if isinstance(value, tuple):
        return all(_frozen_all_the_way(item) for item in value)
    return not isinstance(value, dict)


PADDING = st.text(alphabet=" \t\n\r", max_size=2)


@given(json_values, st.booleans(), PADDING, PADDING)
def test_loads_frozen_equals_freezing_the_decoded_value(
    value: Any, spaced: bool, before: str, after: str
) -> None:
    """R1.6: the same frozen value, deeply immutable, with or without arrays or padding."""
    text = before + json.dumps(value, indent=1 if spaced else None) + after
    decoded = loads_frozen(text)
    assert decoded == freeze_json(json.loads(text))
    assert _frozen_all_the_way(decoded)


@pytest.mark.parametrize(
    "text", ["NaN", '{"a": Infinity}', '{"a": -Infinity}', '{"a": 1e400}', '{"a": [NaN]}']
)
def test_loads_frozen_refuses_numbers_json_cannot_hold(text: str) -> None:
    """R1.6: non-finite numbers are not lossless JSON, with or without arrays."""
    with pytest.raises(InvalidJsonError, match="non-finite"):
        loads_frozen(text)


@pytest.mark.parametrize("text", ['{"a": 1', '{"a": 1} x', "", "{'a': 1}"])
def test_loads_frozen_refuses_text_that_is_not_json(text: str) -> None:
    """Not JSON at all: a ``ValueError``, as from ``json.loads``."""
    with pytest.raises(ValueError, match=r"Expecting|Extra data"):
        loads_frozen(text)


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": 1', "not json"])
def test_parse_arguments_passes_unloadable_text_through_raw(text: str) -> None:
    """R9.6: arguments that are not lossless JSON reach the tool's validation as the raw string."""
    assert parse_arguments(text) == text


def test_parse_arguments_reads_empty_text_as_an_empty_object() -> None:
    """R9.6: empty (or blank) arguments mean ``{}``."""
    assert parse_arguments("  ") == {}
    assert isinstance(parse_arguments(""), FrozenDict)


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, '{"a":' * 5000 + "1" + "}" * 5000])
def test_too_deeply_nested_arguments_are_invalid_json_not_a_crash(text: str) -> None:
    """R1.6, R9.6: text nested past the decoder's depth is refused with a typed error, and a
    tool call carrying it reaches validation as its raw string.
    """
    with pytest.raises(InvalidJsonError, match="nested too deeply"):
        loads_frozen(text)
    assert parse_arguments(text) == text


def test_freezing_a_too_deeply_nested_value_is_invalid_json() -> None:
    """R1.6: a value nested past Python's recursion depth is refused with a typed error."""
    value: list[object] = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(InvalidJsonError, match="nested too deeply"):
        freeze_json(value)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "\ud83d\ude00"}',
        ' {"a": "\ud83d\ude00"} ',
        '"\ud83d\ude00"',
        '{"\ud83d\ude00": 1}',
        '{"a": "\ud83d\\ude00"}',
        '["\ud83d\ude00"]',
    ],
    ids=["value", "padded", "string", "key", "escaped-low-half", "array"],
)
def test_a_surrogate_pair_held_as_two_code_points_is_joined_as_freezing_joins_it(
    text: str,
) -> None:
    """R1.6: text holding a pair as two code points (its halves split across two deltas) parses
    to the one character a stored line reads back, as freezing the decoded value gives."""
    decoded = loads_frozen(text)
    assert decoded == freeze_json(json.loads(text))
    assert "\U0001f600" in json.dumps(decoded, ensure_ascii=False)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        ' {"a": 1, "a": 1} ',
        '{"b": {"a": 1, "\\u0061": 2}}',
        '{"b": [{"a": 1, "a": 2}]}',
        '{"a": [1], "a": {}}',
    ],
    ids=["object", "padded", "escaped", "in-array", "array-path"],
)
def test_loads_frozen_refuses_an_object_with_a_key_twice(text: str) -> None:
    """R1.6: an object naming a key twice holds two values where its frozen value holds one
    (JSON readers keep the first or the last), so it is refused naming the key, and a tool
    call carrying it reaches validation as its raw string."""
    with pytest.raises(InvalidJsonError, match="'a' twice"):
        loads_frozen(text)
    assert parse_arguments(text) == text
