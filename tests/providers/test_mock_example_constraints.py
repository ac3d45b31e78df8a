"""The mock model's tool arguments meet each constraint: numbers their bounds and step, strings
their lengths and pattern, unique items that are objects; a schema that cannot be met still
gets arguments, promptly.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, strategies as st

from retinue.providers.mock import example_arguments

from ._example_arguments_kit import SEEDS, constrained_tool, obj, validator_problem

NUMBER_STEPS = [None, 1, 3, 0.5, 0.25, 0.1, 0.05, 2.5]


@st.composite
def _satisfiable_number(draw: st.DrawFn) -> dict[str, Any]:
    """A number or integer schema with bounds around a value known to satisfy it."""
    step = draw(st.sampled_from(NUMBER_STEPS))
    integer = draw(st.booleans())
    # Exact decimals, as the JSON text reads: the value is a multiple of the step and whole.
    unit = Fraction(repr(step)) if step is not None else Fraction(1, 1 if integer else 100)
    if integer:
        unit = Fraction(math.lcm(unit.numerator, 1), math.gcd(unit.denominator, 1))
    inside = draw(st.integers(-1000, 1000)) * unit
    schema: dict[str, Any] = {"type": "integer" if integer else "number"}
    if step is not None:
        schema["multipleOf"] = step
    below, above = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    if below:
        schema["minimum" if below < 3 else "exclusiveMinimum"] = float(inside - below + 1)
    if above:
        schema["maximum" if above < 3 else "exclusiveMaximum"] = float(inside + above - 1)
    return schema


@given(schema=_satisfiable_number(), seed=st.integers(0, 2**32))
def test_mock_example_numbers_meet_their_bounds_and_step(schema: dict[str, Any], seed: int) -> None:
    """R9.7: a satisfiable number keeps within every bound and is a multiple of its step."""
    tool = constrained_tool(obj({"x": schema}))
    assert validator_problem(tool, seed) is None


# pattern: the length of its shortest match, and the step its lengths go in
STRING_PATTERNS = {
    None: (0, 1),
    "^[a-z]+$": (1, 1),
    "[0-9]": (1, 1),
    "^(ab|cd)+$": (2, 2),
    "^[A-Z][a-z ]*$": (1, 1),
}


@given(
    low=st.integers(0, 60),
    extra=st.integers(0, 20),
    pattern=st.sampled_from(list(STRING_PATTERNS)),
    seed=st.integers(0, 2**32),
)
def test_mock_example_strings_meet_their_lengths_and_pattern(
    low: int, extra: int, pattern: str | None, seed: int
) -> None:
    """R9.7: a string keeps between its lengths and matches its pattern together."""
    shortest, step = STRING_PATTERNS[pattern]
    high = max(low + extra, shortest)
    if high - low < step - 1 and high % step:
        high += 1  # a range this pattern has a length in
    schema: dict[str, Any] = {"type": "string", "minLength": low, "maxLength": high}
    if pattern is not None:
        schema["pattern"] = pattern
    assert validator_problem(constrained_tool(obj({"s": schema})), seed) is None


@pytest.mark.parametrize("pattern", [r"^cost\$", r"^[$]x", r"^a[^$]", r"^(\$|€)[0-9]"])
def test_mock_example_strings_meet_min_length_past_a_literal_dollar(pattern: str) -> None:
    """R9.7: an escaped ``\\$`` or a ``$`` in a class is a character, not an end anchor:
    a match of such a pattern is padded to its ``minLength`` like any other open-ended one.
    """
    tool = constrained_tool(obj({"s": {"type": "string", "pattern": pattern, "minLength": 12}}))
    assert [
        problem for seed in SEEDS if (problem := validator_problem(tool, seed)) is not None
    ] == []


@pytest.mark.parametrize(
    ("pattern", "low"), [(r"\.(pdf|docx)$", 6), (r"@example\.com$", 13), (r"[0-9]{3}\Z", 8)]
)
def test_mock_example_strings_meet_min_length_before_an_end_anchor(pattern: str, low: int) -> None:
    """R9.7: a pattern anchored only at its end is searched, so words put before a match
    keep it one and reach ``minLength``, no draw too short."""
    tool = constrained_tool(obj({"s": {"type": "string", "pattern": pattern, "minLength": low}}))
    assert [
        problem for seed in SEEDS if (problem := validator_problem(tool, seed)) is not None
    ] == []


UNIQUE_OBJECTS = {
    "free-form items": obj(
        {
            "tags": {
                "type": "array",
                "minItems": 2,
                "uniqueItems": True,
                "items": {"type": "object", "additionalProperties": {"type": "string"}},
            }
        }
    ),
    "items of optional properties, nested": obj(
        {
            "filter": obj(
                {
                    "rules": {
                        "type": "array",
                        "minItems": 2,
                        "uniqueItems": True,
                        "items": {"type": "object", "properties": {"field": {"type": "string"}}},
                    }
                }
            )
        }
    ),
}


@pytest.mark.parametrize("schema", list(UNIQUE_OBJECTS.values()), ids=list(UNIQUE_OBJECTS))
def test_mock_example_unique_items_that_are_objects_are_told_apart(schema: dict[str, Any]) -> None:
    """R9.7: objects that need no property are drawn with more when a repeat must be
    avoided, not every draw ``{}``, which items that must be unique refuse."""
    tool = constrained_tool(schema)
    assert [
        problem for seed in SEEDS if (problem := validator_problem(tool, seed)) is not None
    ] == []


UNSATISFIABLE = {
    "empty window": obj({"n": {"type": "integer", "minimum": 5, "maximum": 1}}),
    "endless recursion": {
        "type": "object",
        "$defs": {"N": obj({"n": {"$ref": "#/$defs/N"}})},
        "properties": {"n": {"$ref": "#/$defs/N"}},
        "required": ["n"],
    },
    "vast recursion": {
        "type": "object",
        "$defs": {
            "N": obj({"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}, "minItems": 2}})
        },
        "properties": {"n": {"$ref": "#/$defs/N"}},
        "required": ["n"],
    },
    "lookahead": obj({"s": {"type": "string", "pattern": "^(?=.*[0-9])(?!x)"}}),
    "not anything": obj({"s": {"not": {}}}),
    "too few choices": obj(
        {"a": {"type": "array", "items": {"enum": [1, 2]}, "minItems": 3, "uniqueItems": True}}
    ),
    # Drawn to the length asked, these would run out of memory or hang.
    "vast length": obj({"s": {"type": "string", "minLength": 1e308}}),
    "vast matched length": obj({"s": {"type": "string", "minLength": 1e308, "pattern": "^a+$"}}),
    "vast item count": obj({"a": {"type": "array", "minItems": 10**12}}),
}


@pytest.mark.timeout(10)  # drawn, each takes 13 s, or never ends, on the server's one thread
@pytest.mark.parametrize("pattern", ["^[0-9]{10000000}$", "^a{99999999999999999999}$"])
def test_mock_example_arguments_skip_a_pattern_demanding_vast_repeats(pattern: str) -> None:
    """A pattern whose least match is longer than any string drawn is not drawn from (nor
    compiled, past ``re``'s largest count): the arguments are a best effort, given at once."""
    schema = obj({"s": {"type": "string", "pattern": pattern}})
    arguments = example_arguments(schema, random.Random(0))
    assert isinstance(arguments["s"], str)
    assert len(arguments["s"]) < 1000


@pytest.mark.parametrize("schema", list(UNSATISFIABLE.values()), ids=list(UNSATISFIABLE))
def test_mock_example_arguments_give_a_best_effort_when_the_schema_cannot_be_met(
    schema: dict[str, Any],
) -> None:
    """A schema no value meets, or one past what the draw reads, still gets arguments,
    promptly: every required property, drawn without raising or descending forever.
    """
    constrained_tool(schema)  # a schema a tool accepts
    for seed in range(2):
        arguments = example_arguments(schema, random.Random(seed))
        assert set(arguments) == set(schema["required"])
        assert json.loads(json.dumps(arguments)) == arguments
