"""What the model is told of a tool call whose step was cancelled after its body settled
(SPEC 9.3; R9.20, R9.25): whether the call ran or failed, its result not shown."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Text
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import ToolExecution, ToolExecutionResult
from tests.helpers import OPTIONS, Next, idle_events, runtime, turn_ends
from tests.scenarios._scheduler_kit import check_pairing, results


@retinue.tool
async def write(path: str) -> str:
    """Write a file.

    Args:
        path: The file.
    """
    await trio.lowlevel.checkpoint()
    return f"wrote {path}"


@retinue.tool(timeout=1)
async def stall(path: str) -> str:
    """Wait past the tool's timeout.

    Args:
        path: The file.
    """
    await trio.sleep(100)
    return f"read {path}"


@retinue.tool
async def fail(path: str) -> str:
    """Fail at once.

    Args:
        path: The file.
    """
    await trio.lowlevel.checkpoint()
    raise OSError(f"disk full writing {path}")


async def _held_for_review(_execution: object, _result: object, proceed: Next) -> Any:
    """A post-execute listener that holds each result for five seconds: a cancel lands
    while the result is not yet final."""
    await trio.sleep(5)
    return await proceed()


def _unshown(outcome: str) -> Text:
    return Text(
        f"Error: the tool call {outcome}, but the step was cancelled (stop) before its "
        "result was final, so it is not shown"
    )


async def _cancelled_after_settling(call: ToolCallSpec, wrapper: Any = None) -> Text:
    """The text the model is given for *call*, whose result a post-execute listener held
    when the turn was cancelled; *wrapper*, if given, is a ``tools/execute`` listener."""

    model = ScriptedModel([CallTools([call]), Reply("x")])
    async with runtime(model, tools=[write, stall, fail]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        if wrapper is not None:
            rt.hooks.on("tools/execute", wrapper, agent=agent)
        rt.hooks.on("tools/post-execute", _held_for_review, agent=agent)
        agent.send("go")
        await trio.sleep(3)
        agent.cancel("stop")
        events = await idle_events(agent)
    assert turn_ends(events) == ["aborted"]
    check_pairing(events)
    (result,) = results(events)
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "ABORTED"
    (text,) = result.content
    assert isinstance(text, Text)
    return text


@pytest.mark.parametrize(
    "call",
    [
        ToolCallSpec("missing", '{"path": "/a"}', id="c1"),
        ToolCallSpec("write", '{"path": 5}', id="c1"),
        ToolCallSpec("stall", '{"path": "/a"}', id="c1"),
        ToolCallSpec("fail", '{"path": "/a"}', id="c1"),
    ],
    ids=["unknown-tool", "invalid-arguments", "timeout", "body-raised"],
)
async def test_a_call_that_failed_before_a_cancel_is_not_reported_as_run(
    call: ToolCallSpec, autojump_clock: trio.testing.MockClock
) -> None:
    """R9.20, R9.25: a call whose body never ran (an unknown tool, refused arguments), timed
    out or raised is told as failed, its result unshown: told it ran to its end, the model
    would count on a write that never happened."""
    with trio.fail_after(60):
        assert await _cancelled_after_settling(call) == _unshown("failed")


async def test_a_call_whose_body_returned_before_a_cancel_is_reported_as_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20, R9.25: a body that returned is told as having run to its end."""
    with trio.fail_after(60):
        call = ToolCallSpec("write", '{"path": "/a"}', id="c1")
        assert await _cancelled_after_settling(call) == _unshown("ran to its end")


async def test_a_body_that_returned_inside_a_wrapper_cancelled_after_it_is_reported_as_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20, R9.25: a ``tools/execute`` wrapper awaits the body, which returns, then is cancelled
    in its own wait (an audit write). The model is told the call ran to its end, its result unshown:
    told the call was cancelled, it would run the write again."""
    writes: list[str] = []

    @retinue.tool
    async def record(path: str) -> str:
        """Write a file, keeping what it wrote.

        Args:
            path: The file.
        """
        await trio.lowlevel.checkpoint()
        writes.append(path)
        return f"wrote {path}"

    async def audit(_execution: object, proceed: Next) -> Any:
        result = await proceed()
        await trio.sleep(5)
        return result

    model = ScriptedModel(
        [CallTools([ToolCallSpec("record", '{"path": "/a"}', id="c1")]), Reply("x")]
    )
    with trio.fail_after(60):
        async with runtime(model, tools=[record]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.hooks.on("tools/execute", audit, agent=agent)
            agent.send("go")
            await trio.sleep(1)
            assert writes == ["/a"]
            agent.cancel("stop")
            events = await idle_events(agent)
    assert turn_ends(events) == ["aborted"]
    check_pairing(events)
    (result,) = results(events)
    assert result.content == (_unshown("ran to its end"),)


async def test_a_body_whose_result_a_wrapper_failed_is_reported_as_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20, R9.25: a ``tools/execute`` wrapper that makes an error of the result a body
    returned; cancelled while a post-execute listener held it, the call is told as having
    run to its end, as its body did, not as having failed."""

    async def fail_after_body(execution: ToolExecution, proceed: Next) -> Any:
        await proceed()
        return ToolExecutionResult(execution.call_id, "audit log unavailable", is_error=True)

    with trio.fail_after(60):
        text = await _cancelled_after_settling(
            ToolCallSpec("write", '{"path": "/a"}', id="c1"), fail_after_body
        )
    assert text == _unshown("ran to its end")
