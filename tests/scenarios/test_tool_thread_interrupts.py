"""A sync body's own KeyboardInterrupt is its call's error result, not Ctrl-C (R9.2).

Python delivers Ctrl-C to the main thread only: a KeyboardInterrupt a worker thread
raises is the body's, and passed on it ended the runtime with every agent in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

import retinue
from retinue._content import content_text
from retinue.session import ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import Tool
from tests.helpers import OPTIONS
from tests.scenarios._tool_pipeline_kit import call, failed, setup, shape

# The bodies run in real worker threads: bound each test in real time.
pytestmark = pytest.mark.timeout(30)


@contextmanager
def _not_interrupted() -> Iterator[None]:
    """Fail the test, not the whole run, if the body's KeyboardInterrupt comes out."""
    try:
        yield
    except* KeyboardInterrupt:
        pytest.fail("the sync body's KeyboardInterrupt went on out as Ctrl-C")


def _give_up() -> str:
    raise KeyboardInterrupt


def _give_up_saying() -> str:
    raise KeyboardInterrupt("asked to stop")


@pytest.mark.parametrize(
    ("body", "said"),
    [(_give_up, ""), (_give_up_saying, ": asked to stop")],
    ids=["bare", "with-a-message"],
)
async def test_a_sync_bodys_keyboard_interrupt_is_its_error_result(body: object, said: str) -> None:
    """R9.2: the worker thread's KeyboardInterrupt is the body's own raise: the call's
    error result names it, where it went on out of execute as if Ctrl-C had been pressed.
    """
    quitter = Tool("quitter", "Give up.", {"type": "object"}, body)  # type: ignore[arg-type]
    _, registry = setup(quitter)
    with _not_interrupted(), trio.fail_after(10):
        result = await registry.execute(call("quitter", {}))
    assert shape(result) == failed(
        f'tool "quitter" raised KeyboardInterrupt{said} in its worker thread'
    )


@retinue.tool
def stop() -> str:
    """Stop the way a command-line library might."""
    raise KeyboardInterrupt


async def test_the_agent_goes_on_past_a_sync_bodys_keyboard_interrupt() -> None:
    """R9.2: the turn gets the error result and goes on to its answer; the runtime and its
    agent stay up, where the interrupt ended them both.
    """
    model = ScriptedModel([CallTools([ToolCallSpec("stop", "{}")]), Reply("went on")])
    with _not_interrupted(), trio.fail_after(10):
        async with retinue.open_runtime(models=model, tools=[stop]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            answer = await agent.ask("go")
    assert (answer.reason.kind, answer.text) == ("completed", "went on")
    [result] = [e.data for e in agent.session.events if isinstance(e.data, ToolResultEvent)]
    assert result.is_error
    assert content_text(result.content) == (
        'Error: tool "stop" raised KeyboardInterrupt in its worker thread'
    )
