"""The mock model's tool arguments satisfy the tools' schemas, constraints and all.

Each schema is one a hand-written :class:`retinue.tools.Tool` accepts; the
arguments the mock draws for it are checked by that tool's own validator.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from typing import Any

import pytest
import trio
from hypothesis import given, strategies as st

import retinue
from retinue import AgentOptions
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockServer, example_arguments
from retinue.providers.openai import OpenAIModel
from retinue.session import ToolResultEvent
from retinue.tools import Tool

SEEDS = range(40)


def _obj(properties: dict[str, Any], **keywords: Any) -> dict[str, Any]:
    """An object schema requiring every property in *properties*."""
    return {"type": "object", "properties": properties, "required": list(properties), **keywords}


def _tool(schema: dict[str, Any], name: str = "t", ran: list[str] | None = None) -> Tool:
    async def body(**arguments: object) -> str:
        if ran is not None:
            ran.append(name)
        return json.dumps(arguments)

    return Tool(name, "A constrained tool.", schema, body)


def _problem(tool: Tool, seed: int) -> str | None:
    """What the tool's validator says of the mock's arguments, sent as JSON as a model would."""
    arguments = example_arguments(json.loads(json.dumps(tool.parameters)), random.Random(seed))
    problem = tool.check_arguments(json.loads(json.dumps(arguments)))
    return None if problem is None else f"{problem} in {json.dumps(arguments)}"


# What pydantic's model_json_schema() writes for a model with constrained fields, a
# discriminated union, a recursive model, an enum and a tuple.
PYDANTIC_MODEL = {
    "$defs": {
        "Cat": _obj(
            {
                "kind": {"const": "cat", "type": "string"},
                "lives": {"type": "integer", "minimum": 1, "maximum": 9},
            }
        ),
        "Dog": _obj(
            {
                "kind": {"const": "dog", "type": "string"},
                "bark": {"type": "string", "minLength": 3, "maxLength": 8},
            }
        ),
        "Node": {
            "type": "object",
            "properties": {
                "label": {"type": "string", "pattern": "^[a-z][a-z0-9_]{2,11}$"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 3},
                "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}], "default": None},
            },
            "required": ["label"],
        },
        "Unit": {"enum": ["celsius", "fahrenheit"], "title": "Unit", "type": "string"},
    },
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2, "maxLength": 40},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "step": {
            "type": "number",
            "exclusiveMinimum": 0,
            "exclusiveMaximum": 1,
            "multipleOf": 0.05,
        },
        "unit": {"$ref": "#/$defs/Unit", "default": "celsius"},
        "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
        "pet": {
            "discriminator": {"propertyName": "kind"},
            "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
        },
        "tree": {"$ref": "#/$defs/Node"},
        "pair": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "minItems": 2,
            "maxItems": 2,
        },
    },
    "required": ["city", "days", "step", "code", "tags", "pet", "tree", "pair"],
}

# A tree whose nodes are all filled in: the draw must stop descending on its own.
OPEN_TREE = {
    "$defs": {
        "T": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/T"}, "minItems": 0},
                "parent": {"anyOf": [{"$ref": "#/$defs/T"}, {"type": "null"}]},
            },
        }
    },
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/T"}},
}

SCHEMAS: dict[str, dict[str, Any]] = {
    # numbers
    "minimum": _obj({"n": {"type": "integer", "minimum": 100}}),
    "maximum below zero": _obj({"n": {"type": "integer", "maximum": -50}}),
    "exclusive window": _obj(
        {"x": {"type": "number", "exclusiveMinimum": -5, "exclusiveMaximum": -4}}
    ),
    "narrow window": _obj(
        {"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.0001}}
    ),
    "integer multipleOf": _obj({"n": {"type": "integer", "multipleOf": 7, "minimum": 20}}),
    "number multipleOf": _obj({"x": {"type": "number", "multipleOf": 0.25, "maximum": 1}}),
    "decimal multipleOf": _obj(
        {"x": {"type": "number", "multipleOf": 0.1, "minimum": 0.2, "maximum": 0.5}}
    ),
    "two steps": _obj({"n": {"allOf": [{"multipleOf": 4}, {"multipleOf": 6}], "type": "integer"}}),
    "integer by a fraction": _obj({"n": {"type": "integer", "multipleOf": 0.3, "minimum": 1}}),
    # strings
    "minLength": _obj({"s": {"type": "string", "minLength": 40}}),
    "maxLength": _obj({"s": {"type": "string", "maxLength": 3}}),
    "exact length": _obj({"s": {"type": "string", "minLength": 12, "maxLength": 12}}),
    "empty": _obj({"s": {"type": "string", "maxLength": 0}}),
    "pattern code": _obj({"s": {"type": "string", "pattern": "^[A-Z]{3}$"}}),
    "pattern date": _obj({"s": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}}),
    "pattern choice": _obj({"s": {"type": "string", "pattern": "^(asc|desc)$"}}),
    "pattern email": _obj({"s": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"}}),
    "pattern slug": _obj({"s": {"type": "string", "pattern": "^[a-z0-9_-]+$", "minLength": 20}}),
    "pattern unanchored": _obj({"s": {"type": "string", "pattern": "v[0-9]+", "minLength": 30}}),
    "pattern groups": _obj(
        {"s": {"type": "string", "pattern": r"^(?:\+\d{1,3} )?\(\d{3}\) \d{3}-\d{4}$"}}
    ),
    "pattern escapes": _obj(
        {"s": {"type": "string", "pattern": r"^\x41[\u0400-\u04ff]{2}\.\{\w\}$"}}
    ),
    "pattern named group": _obj(
        {"s": {"type": "string", "pattern": r"^(?P<word>[a-c]{2,})\s\d?$"}}
    ),
    "pattern literal brace": _obj({"s": {"type": "string", "pattern": "^a{}b$"}}),
    # references, recursion and composition
    "ref": {
        "type": "object",
        "$defs": {"P": _obj({"x": {"type": "integer", "minimum": 3}, "y": {"type": "integer"}})},
        "properties": {"p": {"$ref": "#/$defs/P"}},
        "required": ["p"],
    },
    "ref to definitions": {
        "type": "object",
        "definitions": {"C": {"enum": ["red", "green"]}},
        "properties": {"c": {"$ref": "#/definitions/C"}},
        "required": ["c"],
    },
    "ref chain": {
        "type": "object",
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"type": "string", "pattern": "^b+$"}},
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "required": ["a"],
    },
    "linked list": {
        "type": "object",
        "$defs": {
            "N": _obj(
                {
                    "v": {"type": "integer"},
                    "next": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]},
                }
            )
        },
        "properties": {"head": {"$ref": "#/$defs/N"}},
        "required": ["head"],
    },
    "required tree": {
        "type": "object",
        "$defs": {"T": _obj({"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}})},
        "properties": {"t": {"$ref": "#/$defs/T"}},
        "required": ["t"],
    },
    "open tree": OPEN_TREE,
    "root ref": {
        "type": "object",
        "properties": {"me": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    },
    "allOf": _obj({"n": {"allOf": [{"type": "integer", "minimum": 50}, {"maximum": 60}]}}),
    "enum in allOf": _obj({"c": {"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["c", "d"]}]}}),
    "anyOf by type": _obj(
        {"v": {"allOf": [{"type": "string"}], "anyOf": [{"type": "integer"}, {"minLength": 5}]}}
    ),
    "anyOf by const": _obj(
        {"v": {"allOf": [{"type": "integer"}], "anyOf": [{"const": "x"}, {"const": 3}]}}
    ),
    "oneOf overlapping": _obj(
        {"v": {"oneOf": [{"type": "integer"}, {"type": "number", "multipleOf": 0.5}]}}
    ),
    "oneOf const and string": _obj(
        {"v": {"oneOf": [{"const": "auto"}, {"type": "string", "maxLength": 4}]}}
    ),
    "oneOf enum ref": {
        "type": "object",
        "$defs": {"E": {"enum": ["a", "b"]}},
        "properties": {
            "v": {"oneOf": [{"$ref": "#/$defs/E"}, {"type": "string", "pattern": "^[a-c]$"}]}
        },
        "required": ["v"],
    },
    "not const": _obj({"n": {"type": "integer", "minimum": 1, "maximum": 2, "not": {"const": 1}}}),
    "not type": _obj({"v": {"type": ["string", "integer"], "not": {"type": "string"}}}),
    "not enum": _obj({"b": {"type": "boolean", "not": {"enum": [True]}}}),
    # arrays
    "unique enum items": _obj(
        {"a": {"type": "array", "items": {"enum": [1, 2, 3]}, "minItems": 3, "uniqueItems": True}}
    ),
    "unique integers": _obj(
        {
            "a": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": 4},
                "minItems": 5,
                "uniqueItems": True,
            }
        }
    ),
    "unique booleans": _obj(
        {"a": {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "uniqueItems": True}}
    ),
    "unique strings": _obj(
        {"a": {"type": "array", "items": {"type": "string"}, "minItems": 12, "uniqueItems": True}}
    ),
    "no items": _obj({"a": {"type": "array", "maxItems": 0}}),
    "closed tuple": _obj(
        {"a": {"type": "array", "prefixItems": [{"const": 1}, {"type": "string"}], "items": False}}
    ),
    # objects
    "minProperties": _obj({}, minProperties=2),
    "minProperties typed": _obj(
        {},
        minProperties=3,
        additionalProperties={"type": "integer", "minimum": 5},
        propertyNames={"pattern": "^k_[a-z]+$"},
    ),
    "maxProperties": {
        "type": "object",
        "properties": {"a": {}, "b": {}, "c": {}},
        "maxProperties": 2,
    },
    "closed": {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": False,
    },
    "required not listed": {
        "type": "object",
        "required": ["free"],
        "additionalProperties": {"type": "integer"},
    },
    "nested": _obj({"o": _obj({"i": _obj({"deep": {"type": "string", "pattern": "^z{3}$"}})})}),
    "pydantic model": PYDANTIC_MODEL,
}


@pytest.mark.parametrize("schema", list(SCHEMAS.values()), ids=list(SCHEMAS))
def test_mock_example_arguments_pass_the_tool_validator(schema: dict[str, Any]) -> None:
    """R9.7: for a constrained parameter schema a tool accepts, the mock model's
    arguments pass that tool's own argument check, whatever the seed.
    """
    tool = _tool(schema)
    problems = [problem for seed in SEEDS if (problem := _problem(tool, seed)) is not None]
    assert problems == []


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
    tool = _tool(_obj({"x": schema}))
    assert _problem(tool, seed) is None


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
    assert _problem(_tool(_obj({"s": schema})), seed) is None


@pytest.mark.parametrize("pattern", [r"^cost\$", r"^[$]x", r"^a[^$]", r"^(\$|€)[0-9]"])
def test_mock_example_strings_meet_min_length_past_a_literal_dollar(pattern: str) -> None:
    """R9.7: an escaped ``\\$`` or a ``$`` in a class is a character, not an end anchor:
    a match of such a pattern is padded to its ``minLength`` like any other open-ended one.
    """
    tool = _tool(_obj({"s": {"type": "string", "pattern": pattern, "minLength": 12}}))
    assert [problem for seed in SEEDS if (problem := _problem(tool, seed)) is not None] == []


@pytest.mark.parametrize(
    ("pattern", "low"), [(r"\.(pdf|docx)$", 6), (r"@example\.com$", 13), (r"[0-9]{3}\Z", 8)]
)
def test_mock_example_strings_meet_min_length_before_an_end_anchor(pattern: str, low: int) -> None:
    """R9.7: a pattern anchored only at its end is searched, so words put before a match
    keep it one and reach ``minLength``; every draw was too short before."""
    tool = _tool(_obj({"s": {"type": "string", "pattern": pattern, "minLength": low}}))
    assert [problem for seed in SEEDS if (problem := _problem(tool, seed)) is not None] == []


UNIQUE_OBJECTS = {
    "free-form items": _obj(
        {
            "tags": {
                "type": "array",
                "minItems": 2,
                "uniqueItems": True,
                "items": {"type": "object", "additionalProperties": {"type": "string"}},
            }
        }
    ),
    "items of optional properties, nested": _obj(
        {
            "filter": _obj(
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
    avoided; every draw repeated ``{}`` before, refused as items that must be unique."""
    tool = _tool(schema)
    assert [problem for seed in SEEDS if (problem := _problem(tool, seed)) is not None] == []


UNSATISFIABLE = {
    "empty window": _obj({"n": {"type": "integer", "minimum": 5, "maximum": 1}}),
    "endless recursion": {
        "type": "object",
        "$defs": {"N": _obj({"n": {"$ref": "#/$defs/N"}})},
        "properties": {"n": {"$ref": "#/$defs/N"}},
        "required": ["n"],
    },
    "vast recursion": {
        "type": "object",
        "$defs": {
            "N": _obj({"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}, "minItems": 2}})
        },
        "properties": {"n": {"$ref": "#/$defs/N"}},
        "required": ["n"],
    },
    "lookahead": _obj({"s": {"type": "string", "pattern": "^(?=.*[0-9])(?!x)"}}),
    "not anything": _obj({"s": {"not": {}}}),
    "too few choices": _obj(
        {"a": {"type": "array", "items": {"enum": [1, 2]}, "minItems": 3, "uniqueItems": True}}
    ),
    # Drawn to the length asked, these ran out of memory or hung.
    "vast length": _obj({"s": {"type": "string", "minLength": 1e308}}),
    "vast matched length": _obj({"s": {"type": "string", "minLength": 1e308, "pattern": "^a+$"}}),
    "vast item count": _obj({"a": {"type": "array", "minItems": 10**12}}),
}


@pytest.mark.timeout(10)  # each took 13 s, or never ended, on the server's one thread
@pytest.mark.parametrize("pattern", ["^[0-9]{10000000}$", "^a{99999999999999999999}$"])
def test_mock_example_arguments_skip_a_pattern_demanding_vast_repeats(pattern: str) -> None:
    """A pattern whose least match is longer than any string drawn is not drawn from (nor
    compiled, past ``re``'s largest count): the arguments are a best effort, given at once."""
    schema = _obj({"s": {"type": "string", "pattern": pattern}})
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
    _tool(schema)  # a schema a tool accepts
    for seed in range(2):
        arguments = example_arguments(schema, random.Random(seed))
        assert set(arguments) == set(schema["required"])
        assert json.loads(json.dumps(arguments)) == arguments


# -- through the mock server and the runtime ----------------------------------------

CONSTRAINED_TOOLS = {
    "book": _obj(
        {
            "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "seats": {"type": "integer", "minimum": 1, "maximum": 9},
        }
    ),
    "tag": _obj(
        {
            "labels": {
                "type": "array",
                "items": {"type": "string", "minLength": 3, "maxLength": 10},
                "minItems": 2,
                "uniqueItems": True,
            }
        }
    ),
    "plan": {
        "type": "object",
        "$defs": {
            "Step": _obj({"minutes": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5}})
        },
        "properties": {
            "steps": {"type": "array", "items": {"$ref": "#/$defs/Step"}, "minItems": 1}
        },
        "required": ["steps"],
    },
    "pick": PYDANTIC_MODEL,
}


def _adapter(api: str, server: MockServer) -> OpenAIModel | AnthropicModel:
    if api == "messages":
        return AnthropicModel(transport=server.transport(), base_url="http://mock", api_key="k")
    return OpenAIModel(
        transport=server.transport(),
        base_url="http://mock/v1",
        api_key="k",
        api=api,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_echo_policy_calls_constrained_tools_with_arguments_they_accept(
    autojump_clock: trio.abc.Clock, api: str
) -> None:
    """R9.7: agents on the mock server call constrained hand-written tools, and every
    call passes the tools' argument check: no result is an ``INVALID_ARGUMENTS`` error.
    """
    ran: list[str] = []
    tools = [_tool(schema, name, ran) for name, schema in CONSTRAINED_TOOLS.items()]
    server = MockServer(EchoPolicy(max_tool_calls=len(tools), seed=5))
    with trio.fail_after(600):
        async with (
            _adapter(api, server) as model,
            retinue.open_runtime(models=model, tools=tools) as rt,
        ):
            agents = [await rt.create_agent(f"a{i}", AgentOptions(model="m")) for i in range(8)]
            for agent in agents:
                result = await agent.ask("use your tools")
                assert result.reason.kind == "completed"
    results = [
        event.data
        for agent in agents
        for event in agent.session.events
        if isinstance(event.data, ToolResultEvent)
    ]
    assert [r.error.code for r in results if r.error is not None] == []
    assert not any(r.is_error for r in results)
    assert len(ran) == len(results)
    assert set(ran) == set(CONSTRAINED_TOOLS)
