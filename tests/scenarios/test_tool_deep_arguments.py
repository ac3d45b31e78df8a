"""A tool with a recursive schema, called by a model with arguments nested as deep as JSON
may be (R9.2, R9.3 stage 3, R9.6): invalid ones are an ``INVALID_ARGUMENTS`` result and
the turn goes on; valid ones reach the body."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue._content import Text
from retinue._lossless import MAX_JSON_DEPTH
from retinue.session import ToolErrorInfo, ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, of_type, runtime

# A linked list, as pydantic writes ``child: Optional["Node"]``: anyOf of a $ref and null.
NODE = {
    "type": "object",
    "properties": {"value": {"type": "integer"}, "child": {"$ref": "#/$defs/Child"}},
    "required": ["value"],
}
SCHEMA = {
    "type": "object",
    "properties": {"head": {"$ref": "#/$defs/Node"}},
    "required": ["head"],
    "$defs": {"Node": NODE, "Child": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
}


def linked(depth: int, last: str) -> str:
    """Arguments whose ``head`` is *depth* nodes long, the last one's value *last*."""
    text = f'{{"value": {last}}}'
    for _ in range(depth - 1):
        text = f'{{"value": 1, "child": {text}}}'
    return f'{{"head": {text}}}'


async def called(arguments: str, walked: list[int]) -> tuple[ToolResultEvent, str]:
    """The tool result of one call with *arguments*, and the turn's end reason."""

    async def walk(head: dict[str, object]) -> str:
        walked.append(1)
        return "walked"

    tool = retinue.Tool("walk", "Walk a list.", SCHEMA, walk)
    model = ScriptedModel([CallTools([ToolCallSpec("walk", arguments, id="w")]), Reply("done")])
    async with runtime(model, tools=[tool]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        (answer,) = [e.data for e in of_type(agent.session.events, "tool/result")]
    assert isinstance(answer, ToolResultEvent)
    return answer, result.reason.kind


async def test_a_mistake_150_levels_deep_is_invalid_arguments_and_the_turn_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.2: arguments nested 150 deep against a recursive schema are refused with
    ``INVALID_ARGUMENTS`` naming the mistake's path, not a ``RecursionError`` from the check ending
    the turn in error; the body never runs."""
    walked: list[int] = []
    answer, ended = await called(linked(150, '"one"'), walked)
    assert ended == "completed"
    assert answer.error == ToolErrorInfo("ToolError", "INVALID_ARGUMENTS")
    path = "head." + "child." * 149 + "value"
    assert answer.content == (
        Text(f'Error: invalid arguments for tool "walk": {path}: expected integer, got string'),
    )
    assert walked == []


async def test_valid_arguments_as_deep_as_json_allows_reach_the_body(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.6: the deepest arguments the loop parses (MAX_JSON_DEPTH levels) that match a
    recursive schema are valid: the body runs and its output is the result."""
    walked: list[int] = []
    depth = MAX_JSON_DEPTH - 1  # the arguments object is a level of its own
    answer, ended = await called(linked(depth, "7"), walked)
    assert (ended, walked) == ("completed", [1])
    assert (answer.is_error, answer.content) == (False, (Text("walked"),))
