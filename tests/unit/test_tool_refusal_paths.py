"""How an argument refusal names the key it is about (R9.3 stage 3, R9.6).

A path joins plain keys with dots (``options.units``); a key a dot would misread
(holding a dot, a bracket, a space, or empty) is quoted as JSON in brackets
(``options["x.y"]``), so that one key never reads as two levels.
"""

from __future__ import annotations

import dataclasses

import pytest

from retinue._lossless import JsonValue
from retinue.tools import Tool, tool
from tests.unit._tool_kit import execute

NESTED = Tool(
    "nested",
    "A record of odd keys.",
    {
        "type": "object",
        "properties": {
            "a": {
                "type": "object",
                "properties": {
                    "b.c": {"type": "integer"},
                    "": {"type": "integer"},
                    "max-count": {"type": "integer"},
                    "d": {"type": "integer"},
                },
                "additionalProperties": False,
            },
            "x.y": {"type": "string"},
        },
        "required": ["x.y"],
        "additionalProperties": False,
    },
    lambda **_: "ok",
)


async def _refusal(target: Tool, arguments: JsonValue) -> str:
    text, error = await execute(target, arguments)
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    return text.removeprefix(f'Error: invalid arguments for tool "{target.name}": ')


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"x.y": "", "a": {"b.c": "1"}}, 'a["b.c"]: expected integer, got string'),
        ({"x.y": "", "a": {"": "1"}}, 'a[""]: expected integer, got string'),
        ({"x.y": "", "a": {"b": {"c": 1}}}, "a.b: unexpected property"),
        ({"x.y": "", "a": {"b c": 1}}, 'a["b c"]: unexpected property'),
        ({"x.y": "", "a": {'q"]': 1}}, 'a["q\\"]"]: unexpected property'),
        ({"x.y": 1}, '["x.y"]: expected string, got integer'),
        ({"a": {}}, '["x.y"]: missing required property'),
        ({"x.y": "", "a.b": 1}, '["a.b"]: unexpected property'),
        ({"x.y": "", "": 1}, '[""]: unexpected property'),
    ],
)
async def test_a_key_a_dot_would_misread_is_quoted(arguments: JsonValue, problem: str) -> None:
    """R9.6: a key holding a dot, a space or a quote, or an empty one, is named in brackets,
    quoted as JSON, at the top level too; a path to a nested key keeps its dots."""
    assert await _refusal(NESTED, arguments) == problem


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"x.y": "", "a": {"d": "1"}}, "a.d: expected integer, got string"),
        ({"x.y": "", "a": {"max-count": "1"}}, "a.max-count: expected integer, got string"),
    ],
)
async def test_a_plain_key_is_named_as_before(arguments: JsonValue, problem: str) -> None:
    """R9.6: an identifier, or one joined by hyphens, is named bare after a dot."""
    assert await _refusal(NESTED, arguments) == problem


def _counts(options: dict[str, int]) -> str:
    return ""


async def test_a_mapping_key_is_quoted_in_the_schemas_check() -> None:
    """R9.6: the key of a ``dict[str, X]`` parameter, checked against the schema."""
    counts = tool(_counts)
    refusal = await _refusal(counts, {"options": {"x.y": "no"}})
    assert refusal == 'options["x.y"]: expected integer, got string'


@dataclasses.dataclass
class Span:
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError("ends before it starts")


def _spans(spans: dict[str, Span]) -> str:
    return ""


def _named(**spans: Span) -> str:
    return ""


async def test_a_mapping_key_is_quoted_in_a_conversion_refusal() -> None:
    """R9.6: a value the schema takes and its type's own check refuses is named by the
    same path: its key quoted, the keys around it plain."""
    spans = tool(_spans)
    refusal = await _refusal(spans, {"spans": {"a.b": {"start": 2, "end": 1}}})
    assert refusal == 'spans["a.b"]: ends before it starts'


async def test_an_argument_of_kwargs_is_quoted_in_a_conversion_refusal() -> None:
    """R9.6: an argument ``**kwargs`` takes, refused as it is converted, is named in
    brackets when its name would misread, bare when it would not."""
    named = tool(_named)
    arguments: JsonValue = {"a.b": {"start": 2, "end": 1}, "c": {"start": 2, "end": 1}}
    refusal = await _refusal(named, arguments)
    assert refusal == '["a.b"]: ends before it starts; c: ends before it starts'


# -- a long key is cut short -------------------------------------------------------------

LONG = "k" * 1_000_000
CUT = f'["{"k" * 60}..." (1000000 characters)]'


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"x.y": "", LONG: 1}, f"{CUT}: unexpected property"),
        ({"x.y": "", "a": {LONG: 1}}, f"a{CUT}: unexpected property"),
        (
            {"x.y": "", "a": {"k." + LONG: 1}},
            f'a["k.{"k" * 58}..." (1000002 characters)]: unexpected property',
        ),
    ],
    ids=["top", "nested", "quoted"],
)
async def test_a_long_key_is_named_by_its_start_and_length(
    arguments: JsonValue, problem: str
) -> None:
    """R9.6: a key of more than 64 characters is not echoed to the model whole: its first
    60 are, quoted, then its length."""
    assert await _refusal(NESTED, arguments) == problem


async def test_a_key_of_64_characters_is_named_whole() -> None:
    """R9.6: a key as long as a provider lets a property name be is named whole."""
    key = "k" * 64
    assert await _refusal(NESTED, {"x.y": "", key: 1}) == f"{key}: unexpected property"


async def test_a_long_argument_of_kwargs_is_cut_in_a_conversion_refusal() -> None:
    """R9.6: an argument ``**kwargs`` takes, refused as it is converted, by its start too."""
    named = tool(_named)
    refusal = await _refusal(named, {LONG: {"start": 2, "end": 1}})
    assert refusal == f"{CUT}: ends before it starts"
