"""Schemas, tools and the validator's verdict, for the mock example argument modules."""

from __future__ import annotations

import json
import random
from typing import Any

from retinue.providers.mock import example_arguments
from retinue.tools import Tool

SEEDS = range(40)


def obj(properties: dict[str, Any], **keywords: Any) -> dict[str, Any]:
    """An object schema requiring every property in *properties*."""
    return {"type": "object", "properties": properties, "required": list(properties), **keywords}


def constrained_tool(schema: dict[str, Any], name: str = "t", ran: list[str] | None = None) -> Tool:
    async def body(**arguments: object) -> str:
        if ran is not None:
            ran.append(name)
        return json.dumps(arguments)

    return Tool(name, "A constrained tool.", schema, body)


def validator_problem(tool: Tool, seed: int) -> str | None:
    """What the tool's validator says of the mock's arguments, sent as JSON as a model would."""
    arguments = example_arguments(json.loads(json.dumps(tool.parameters)), random.Random(seed))
    problem = tool.check_arguments(json.loads(json.dumps(arguments)))
    return None if problem is None else f"{problem} in {json.dumps(arguments)}"
