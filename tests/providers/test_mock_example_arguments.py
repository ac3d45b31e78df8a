"""The mock model's tool arguments satisfy the tools' schemas, constraints and all.

Each schema is one a hand-written :class:`retinue.tools.Tool` accepts; the
arguments the mock draws for it are checked by that tool's own validator, drawn
directly and through the mock server and the runtime.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import retinue
from retinue import AgentOptions
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockServer
from retinue.providers.openai import OpenAIModel
from retinue.session import ToolResultEvent

from ._example_arguments_kit import SEEDS, constrained_tool, obj, validator_problem

# What pydantic's model_json_schema() writes for a model with constrained fields, a
# discriminated union, a recursive model, an enum and a tuple.
PYDANTIC_MODEL = {
    "$defs": {
        "Cat": obj(
            {
                "kind": {"const": "cat", "type": "string"},
                "lives": {"type": "integer", "minimum": 1, "maximum": 9},
            }
        ),
        "Dog": obj(
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
    "minimum": obj({"n": {"type": "integer", "minimum": 100}}),
    "maximum below zero": obj({"n": {"type": "integer", "maximum": -50}}),
    "exclusive window": obj(
        {"x": {"type": "number", "exclusiveMinimum": -5, "exclusiveMaximum": -4}}
    ),
    "narrow window": obj(
        {"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.0001}}
    ),
    "integer multipleOf": obj({"n": {"type": "integer", "multipleOf": 7, "minimum": 20}}),
    "number multipleOf": obj({"x": {"type": "number", "multipleOf": 0.25, "maximum": 1}}),
    "decimal multipleOf": obj(
        {"x": {"type": "number", "multipleOf": 0.1, "minimum": 0.2, "maximum": 0.5}}
    ),
    "two steps": obj({"n": {"allOf": [{"multipleOf": 4}, {"multipleOf": 6}], "type": "integer"}}),
    "integer by a fraction": obj({"n": {"type": "integer", "multipleOf": 0.3, "minimum": 1}}),
    # strings
    "minLength": obj({"s": {"type": "string", "minLength": 40}}),
    "maxLength": obj({"s": {"type": "string", "maxLength": 3}}),
    "exact length": obj({"s": {"type": "string", "minLength": 12, "maxLength": 12}}),
    "empty": obj({"s": {"type": "string", "maxLength": 0}}),
    "pattern code": obj({"s": {"type": "string", "pattern": "^[A-Z]{3}$"}}),
    "pattern date": obj({"s": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}}),
    "pattern choice": obj({"s": {"type": "string", "pattern": "^(asc|desc)$"}}),
    "pattern email": obj({"s": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"}}),
    "pattern slug": obj({"s": {"type": "string", "pattern": "^[a-z0-9_-]+$", "minLength": 20}}),
    "pattern unanchored": obj({"s": {"type": "string", "pattern": "v[0-9]+", "minLength": 30}}),
    "pattern groups": obj(
        {"s": {"type": "string", "pattern": r"^(?:\+\d{1,3} )?\(\d{3}\) \d{3}-\d{4}$"}}
    ),
    "pattern escapes": obj(
        {"s": {"type": "string", "pattern": r"^\x41[\u0400-\u04ff]{2}\.\{\w\}$"}}
    ),
    "pattern named group": obj({"s": {"type": "string", "pattern": r"^(?P<word>[a-c]{2,})\s\d?$"}}),
    "pattern literal brace": obj({"s": {"type": "string", "pattern": "^a{}b$"}}),
    # references, recursion and composition
    "ref": {
        "type": "object",
        "$defs": {"P": obj({"x": {"type": "integer", "minimum": 3}, "y": {"type": "integer"}})},
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
            "N": obj(
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
        "$defs": {"T": obj({"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}})},
        "properties": {"t": {"$ref": "#/$defs/T"}},
        "required": ["t"],
    },
    "open tree": OPEN_TREE,
    "root ref": {
        "type": "object",
        "properties": {"me": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    },
    "allOf": obj({"n": {"allOf": [{"type": "integer", "minimum": 50}, {"maximum": 60}]}}),
    "enum in allOf": obj({"c": {"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["c", "d"]}]}}),
    "anyOf by type": obj(
        {"v": {"allOf": [{"type": "string"}], "anyOf": [{"type": "integer"}, {"minLength": 5}]}}
    ),
    "anyOf by const": obj(
        {"v": {"allOf": [{"type": "integer"}], "anyOf": [{"const": "x"}, {"const": 3}]}}
    ),
    "oneOf overlapping": obj(
        {"v": {"oneOf": [{"type": "integer"}, {"type": "number", "multipleOf": 0.5}]}}
    ),
    "oneOf const and string": obj(
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
    "not const": obj({"n": {"type": "integer", "minimum": 1, "maximum": 2, "not": {"const": 1}}}),
    "not type": obj({"v": {"type": ["string", "integer"], "not": {"type": "string"}}}),
    "not enum": obj({"b": {"type": "boolean", "not": {"enum": [True]}}}),
    # arrays
    "unique enum items": obj(
        {"a": {"type": "array", "items": {"enum": [1, 2, 3]}, "minItems": 3, "uniqueItems": True}}
    ),
    "unique integers": obj(
        {
            "a": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": 4},
                "minItems": 5,
                "uniqueItems": True,
            }
        }
    ),
    "unique booleans": obj(
        {"a": {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "uniqueItems": True}}
    ),
    "unique strings": obj(
        {"a": {"type": "array", "items": {"type": "string"}, "minItems": 12, "uniqueItems": True}}
    ),
    "no items": obj({"a": {"type": "array", "maxItems": 0}}),
    "closed tuple": obj(
        {"a": {"type": "array", "prefixItems": [{"const": 1}, {"type": "string"}], "items": False}}
    ),
    # objects
    "minProperties": obj({}, minProperties=2),
    "minProperties typed": obj(
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
    "nested": obj({"o": obj({"i": obj({"deep": {"type": "string", "pattern": "^z{3}$"}})})}),
    "pydantic model": PYDANTIC_MODEL,
}


@pytest.mark.parametrize("schema", list(SCHEMAS.values()), ids=list(SCHEMAS))
def test_mock_example_arguments_pass_the_tool_validator(schema: dict[str, Any]) -> None:
    """R9.7: for a constrained parameter schema a tool accepts, the mock model's
    arguments pass that tool's own argument check, whatever the seed.
    """
    tool = constrained_tool(schema)
    problems = [problem for seed in SEEDS if (problem := validator_problem(tool, seed)) is not None]
    assert problems == []


# -- through the mock server and the runtime ----------------------------------------

CONSTRAINED_TOOLS = {
    "book": obj(
        {
            "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "seats": {"type": "integer", "minimum": 1, "maximum": 9},
        }
    ),
    "tag": obj(
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
            "Step": obj({"minutes": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5}})
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
    tools = [constrained_tool(schema, name, ran) for name, schema in CONSTRAINED_TOOLS.items()]
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
