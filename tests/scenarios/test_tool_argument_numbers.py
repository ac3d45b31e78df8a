"""Tool arguments that are JSON no value can hold: the error says what is wrong (R9.6, R9.2)."""

from __future__ import annotations

import sys

import pytest
import trio.testing

from retinue._errors import InvalidJsonError
from retinue._lossless import loads_frozen
from retinue.session import ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import tool
from tests.helpers import OPTIONS, of_type, runtime

LONG = "9" * (sys.get_int_max_str_digits() + 1)


@tool
def count(n: int) -> str:
    """Echo a count."""
    return str(n)


async def _result_text(arguments: str) -> str:
    model = ScriptedModel([CallTools([ToolCallSpec("count", arguments, id="c1")]), Reply("done")])
    async with runtime(model, tools=[count]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        (event,) = of_type(agent.session.events, "tool/result")
    assert isinstance(event.data, ToolResultEvent)
    assert event.data.is_error
    return "".join(getattr(block, "text", "") for block in event.data.content)


@pytest.mark.parametrize(
    "arguments", [f'{{"n": {LONG}}}', f'{{"n": [{LONG}]}}'], ids=["object", "array"]
)
async def test_an_integer_too_long_to_read_is_named_not_called_invalid_json(
    autojump_clock: trio.testing.MockClock, arguments: str
) -> None:
    """R9.6: arguments holding an integer of more digits than Python reads are valid JSON;
    the model is told the number is too long, not that its JSON is broken.
    """
    text = await _result_text(arguments)
    limit = sys.get_int_max_str_digits()
    assert text == (
        'Error: invalid arguments for tool "count": arguments: the JSON text holds an '
        f"integer of more than {limit} digits, too long to read"
    )


async def test_broken_json_arguments_are_still_called_not_valid_json(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.6: arguments that are not JSON at all keep their "not valid JSON" error."""
    text = await _result_text('{"n": 3')
    assert text == (
        'Error: invalid arguments for tool "count": arguments: not valid JSON: \'{"n": 3\''
    )


def test_loads_frozen_names_an_integer_too_long_to_read() -> None:
    """R9.6: the lossless parser refuses such an integer with an InvalidJsonError saying so,
    and a syntax error stays a ValueError.
    """
    with pytest.raises(InvalidJsonError, match="integer of more than"):
        loads_frozen(LONG)
    with pytest.raises(ValueError, match="Expecting"):
        loads_frozen('{"n": ')
