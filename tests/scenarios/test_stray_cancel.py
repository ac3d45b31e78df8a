"""A listener raising a ``trio.Cancelled`` of its own is its failure, not the agent's end (R7.48)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue._content import content_text
from retinue.session import ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import (
    OPTIONS,
    echo,
    idle_events,
    last_end_reason,
    of_type,
    raise_stray_cancelled,
    runtime,
    texts,
)


async def test_agent_request_listener_raising_stray_cancelled_fails_the_turn_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.48: the turn ends with an error naming the misuse, ``agent/error`` reports it,
    and the agent serves its next turn (it used to be logged disposed and torn down)."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[BaseException] = []
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)

        async def on_request(*args: object) -> object:
            await raise_stray_cancelled()
            raise AssertionError("not reached")

        unregister = rt.hooks.on("agent/request", on_request, agent=agent)
        first = await agent.ask("go")
        assert (first.reason.kind, first.reason.code) == ("error", "STRAY_CANCELLED")
        assert [getattr(error, "code", None) for error in errors] == ["STRAY_CANCELLED"]
        assert agent.status == "idle"
        unregister()
        second = await agent.ask("again")
        assert second.reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_pre_execute_listener_raising_stray_cancelled_fails_the_call_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.48, docs/hooks.md: a failing tools/pre-execute listener makes the call's result
    an error and the turn goes on."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("done")])
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def on_pre_execute(*args: object) -> object:
            await raise_stray_cancelled()
            raise AssertionError("not reached")

        rt.hooks.on("tools/pre-execute", on_pre_execute, agent=agent)
        result = await agent.ask("go")
        events = await idle_events(agent)
        assert result.reason.kind == "completed"
        assert last_end_reason(events).kind == "completed"
        [logged] = of_type(events, "tool/result")
        assert isinstance(logged.data, ToolResultEvent)
        assert logged.data.is_error
        assert "trio.Cancelled" in texts(logged.data.content)
        check_session_invariants(events)


async def test_a_real_cancel_still_reaches_a_listener_and_ends_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40: a Cancelled from a cancel of the agent is not a listener's failure."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        entered = trio.Event()

        async def on_request(*args: object) -> object:
            entered.set()
            await trio.sleep_forever()

        rt.hooks.on("agent/request", on_request, agent=agent)
        agent.send("go")
        await entered.wait()
        agent.cancel("stop")
        events = await idle_events(agent)
        assert last_end_reason(events).kind == "aborted"


class _Fatal(BaseException):
    """Not an Exception: trio lets it end the runtime."""


@retinue.tool
async def fatal() -> str:
    """Raise a BaseException that is no cancellation."""
    await trio.lowlevel.checkpoint()
    raise _Fatal("fatal")


async def test_a_body_raising_a_base_exception_logs_the_turn_as_its_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40, R4.16: the BaseException ends the runtime, as trio has it, but the log
    says what ended the turn (it used to log a disposal nobody asked for), and so
    does the ``ask`` answered before the runtime's teardown disposed the agent; the
    call it ended is answered as interrupted by a failure, not as cancelled."""
    model = ScriptedModel([CallTools([ToolCallSpec("fatal", "{}")]), Reply("never")])
    sessions: list[retinue.Session] = []
    answers: list[retinue.TurnResult] = []
    with pytest.RaisesGroup(_Fatal, flatten_subgroups=True):
        async with runtime(model, tools=[fatal]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            sessions.append(agent.session)
            answers.append(await agent.ask("go"))
    events = sessions[0].events
    reason = last_end_reason(events)
    assert (reason.kind, reason.code) == ("error", "UNKNOWN")
    assert "fatal" in (reason.message or "")
    assert [answer.reason for answer in answers] == [reason]
    [result] = [event.data for event in events if isinstance(event.data, ToolResultEvent)]
    assert result.error is not None
    assert (result.error.code, content_text(result.content)) == (
        "INTERNAL",
        "Error: the tool call was interrupted by a failure",
    )
    check_session_invariants(events)


@retinue.tool
async def interrupted() -> str:
    """Ctrl-C landing in a tool body."""
    await trio.lowlevel.checkpoint()
    raise KeyboardInterrupt


async def test_ctrl_c_in_a_body_ends_the_turn_as_a_disposal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40, R12.10: Ctrl-C interrupts from outside, like the runtime's teardown: the
    turn is logged disposed, no agent/error is reported, and the interrupt goes on."""
    model = ScriptedModel([CallTools([ToolCallSpec("interrupted", "{}")]), Reply("never")])
    sessions: list[retinue.Session] = []
    errors: list[BaseException] = []
    with pytest.RaisesGroup(KeyboardInterrupt, flatten_subgroups=True):
        async with runtime(model, tools=[interrupted]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
            sessions.append(agent.session)
            await agent.ask("go")
    assert last_end_reason(sessions[0].events).kind == "disposed"
    assert errors == []
    check_session_invariants(sessions[0].events)
