"""Running a tool through a registry of its own, reading its schema, and records to hint with."""

from __future__ import annotations

import typing
from typing import Any

import attrs
import trio

from retinue._content import content_text
from retinue._lossless import JsonValue, thaw_json
from retinue.hooks import HookBus
from retinue.session import ToolErrorInfo
from retinue.tools import Tool, ToolExecution, ToolRegistry
from tests.helpers import DEADLINE


async def execute(target: Tool, arguments: JsonValue) -> tuple[str, ToolErrorInfo | None]:
    """The text and error info of one call of *target* with *arguments*."""
    registry = ToolRegistry(HookBus(), [target])
    with trio.fail_after(DEADLINE):
        result = await registry.execute(ToolExecution("c1", target.name, arguments))
    return content_text(result.content), result.error


def properties(definition: Tool) -> dict[str, Any]:
    """The tool's advertised properties, as plain JSON."""
    schema = thaw_json(definition.parameters)
    assert isinstance(schema, dict)
    return typing.cast("dict[str, Any]", schema["properties"])


@attrs.frozen
class Window:
    width: int
    title: str = "untitled"


@attrs.frozen
class Branch:
    leaves: list[str]
    parent: Branch | None = None


def schema_of(fn: Tool) -> object:
    return thaw_json(fn.parameters)
