"""A str subclass met in a tool's call or result is kept as the str it holds (R9.1-R9.3).

A ``StrEnum`` member, or a subclass writing its own ``__str__``, would otherwise be
logged as that subclass live but load back as a plain str, and a message formatting
it would show its ``__str__``, not its text. A body's returned str already is the
plain str; the values below met the subclass as given.
"""

from __future__ import annotations

import enum

import pytest

from retinue._content import Text
from retinue._errors import ToolError
from retinue.tools import Tool, ToolExecution, ToolOutput
from tests.scenarios._tool_pipeline_kit import setup

pytestmark = pytest.mark.timeout(30)  # sync bodies run in worker threads, on the real clock


class Code(enum.StrEnum):
    SOLD_OUT = "SOLD_OUT"


class Shouting(str):
    """A str whose ``__str__`` is not its text."""

    __slots__ = ()

    def __str__(self) -> str:
        return self.upper()


@pytest.mark.parametrize("text", [Code.SOLD_OUT, Shouting("quiet")], ids=["enum", "own-str"])
async def test_a_tool_outputs_str_subclass_content_is_a_plain_str(text: str) -> None:
    """R9.3: ``ToolOutput(content)`` given a str subclass holds the plain str, as the same
    value returned bare does."""
    for value in (text, ToolOutput(text)):
        fixed = Tool("fixed", "Returns a fixed value.", {"type": "object"}, lambda v=value: v)
        _, registry = setup(fixed)
        result = await registry.execute(ToolExecution("c1", "fixed", {}))
        assert result.content == (Text(str.__str__(text)),)
        (block,) = result.content
        assert isinstance(block, Text)
        assert type(block.text) is str


async def test_a_tool_errors_str_subclass_code_is_a_plain_str() -> None:
    """R9.2: the code of a ``ToolError`` given as a ``StrEnum`` member is the plain str."""

    def sold_out() -> str:
        raise ToolError("none left", code=Code.SOLD_OUT)

    _, registry = setup(Tool("buy", "Buys.", {"type": "object"}, sold_out))
    result = await registry.execute(ToolExecution("c1", "buy", {}))
    assert result.error is not None
    assert result.error.code == "SOLD_OUT"
    assert type(result.error.code) is str


async def test_a_calls_str_subclass_fields_are_plain_strs() -> None:
    """R9.1: a call built with str subclasses holds the plain strs, so its error names
    the tool by its text, not by the subclass's ``__str__``."""
    execution = ToolExecution(Shouting("c1"), Shouting("nope"), {}, agent_id=Shouting("a"))
    assert [type(value) for value in (execution.call_id, execution.name, execution.agent_id)] == [
        str,
        str,
        str,
    ]
    _, registry = setup()
    result = await registry.execute(execution)
    assert result.content == (Text('Error: unknown tool "nope"'),)
    assert type(result.call_id) is str
