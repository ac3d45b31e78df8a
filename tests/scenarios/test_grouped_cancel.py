"""A ``trio.Cancelled`` inside an exception group (a nursery the code opened) is judged as a
bare one is: a stray one is the code's failure, a real one passes on alone (R7.48, R9.2)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, cast

import pytest
import trio
import trio.testing

import retinue
from retinue.providers import ModelRequest, StreamChunk
from retinue.session import ToolResultEvent
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, idle_events, kept_stray_cancelled, of_type, runtime

Grouping = Callable[[trio.Cancelled], BaseExceptionGroup[BaseException]]

GROUPINGS: dict[str, Grouping] = {
    "alone": lambda cancel: BaseExceptionGroup("nursery", [cancel]),
    "with-a-failure": lambda cancel: BaseExceptionGroup("nursery", [cancel, ValueError("v")]),
    "nested": lambda cancel: BaseExceptionGroup(
        "outer", [BaseExceptionGroup("inner", [cancel]), KeyError("k")]
    ),
}


@pytest.fixture(params=sorted(GROUPINGS))
def grouping(request: pytest.FixtureRequest) -> Grouping:
    return GROUPINGS[request.param]


async def test_a_tool_raising_a_group_with_a_stray_cancel_fails_only_its_call(
    grouping: Grouping, autojump_clock: trio.testing.MockClock
) -> None:
    """R9.2, R7.48: the call's result is a STRAY_CANCELLED error and the turn goes on: the group is
    not taken for a cancel of the agent (disposed, torn down), nor, with a failure beside it, does
    its failure end the runtime and every agent in it."""

    @retinue.tool
    async def grouped() -> str:
        """Misuse a cancel inside a nursery."""
        raise grouping(await kept_stray_cancelled())

    model = ScriptedModel(
        [CallTools([ToolCallSpec("grouped", "{}")]), Reply("done")], repeat_last=True
    )
    async with runtime(model, tools=[grouped]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        bystander = await rt.create_agent("b", OPTIONS)
        result = await agent.ask("go")
        assert (result.reason.kind, result.text) == ("completed", "done")
        [logged] = of_type(await idle_events(agent), "tool/result")
        assert isinstance(logged.data, ToolResultEvent)
        assert logged.data.is_error
        assert logged.data.error is not None
        assert logged.data.error.code == "STRAY_CANCELLED"
        assert agent.status == "idle"
        assert (await bystander.ask("x")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_a_listener_raising_a_group_with_a_stray_cancel_fails_only_its_turn(
    grouping: Grouping, autojump_clock: trio.testing.MockClock
) -> None:
    """R7.48: an agent/pre-step listener's group ends the turn ``error``/STRAY_CANCELLED,
    reported on ``agent/error``, and the agent serves its next turn."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[BaseException] = []
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)

        async def pre_step(*_args: object) -> Any:
            raise grouping(await kept_stray_cancelled())

        unregister = rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        first = await agent.ask("go")
        assert (first.reason.kind, first.reason.code) == ("error", "STRAY_CANCELLED")
        assert [getattr(error, "code", None) for error in errors] == ["STRAY_CANCELLED"]
        unregister()
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


class _GroupingModel:
    """Raises a group holding a stray Cancelled before its first chunk, once."""

    def __init__(self, model: ScriptedModel, grouping: Grouping) -> None:
        self.model, self.grouping, self.raised = model, grouping, False

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        if not self.raised:
            self.raised = True
            raise self.grouping(await kept_stray_cancelled())
        stream = cast(AsyncGenerator[StreamChunk, None], self.model.stream(request))
        async with aclosing(stream) as chunks:
            async for chunk in chunks:
                yield chunk


async def test_a_model_raising_a_group_with_a_stray_cancel_fails_only_its_turn(
    grouping: Grouping, autojump_clock: trio.testing.MockClock
) -> None:
    """R7.36, R7.48: the turn ends ``error``/STRAY_CANCELLED, not ``disposed``."""
    model = _GroupingModel(ScriptedModel([Reply("ok")], repeat_last=True), grouping)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        first = await agent.ask("go")
        assert (first.reason.kind, first.reason.code) == ("error", "STRAY_CANCELLED")
        assert isinstance(first.error, retinue.ModelError)
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize("seam", ["agent/queued", "agent/status"])
async def test_a_synchronous_listener_raising_a_group_with_a_cancel_is_contained(
    seam: str, grouping: Grouping, autojump_clock: trio.testing.MockClock
) -> None:
    """R7.48: no cancel is delivered to synchronous code, so a group holding one is the listener's
    failure, contained like any other: from agent/queued it does not escape ``send`` and end the
    runtime's block early and silently, nor from agent/status end the agent."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        cancel = await kept_stray_cancelled()

        def listener(*_args: object) -> None:
            raise grouping(cancel)

        if seam == "agent/queued":
            rt.hooks.on("agent/queued", listener, agent=agent)
        else:
            rt.hooks.on("agent/status", listener, agent=agent)
        first = await agent.ask("go")
        assert (first.reason.kind, first.text) == ("completed", "ok")
        assert agent.status == "idle"
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_a_real_cancel_in_a_group_with_a_failure_aborts_the_turn_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40, R9.2: a body whose nursery raises the agent's cancel beside a failure of its
    own is cancelled: the turn ends aborted, the call is answered ABORTED, and the agent
    goes on without a restart."""
    started = trio.Event()

    @retinue.tool
    async def tidy() -> str:
        """Fail while being cancelled."""
        try:
            started.set()
            await trio.sleep_forever()
        except trio.Cancelled as cancel:
            raise BaseExceptionGroup("nursery", [cancel, ValueError("cleanup failed")]) from None
        return "unreachable"

    model = ScriptedModel([CallTools([ToolCallSpec("tidy", "{}")]), Reply("after")])
    async with runtime(model, tools=[tidy]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        restarts: list[object] = []
        rt.hooks.on("agent/restarted", lambda *args: restarts.append(args), agent=agent)
        agent.send("go")
        await started.wait()
        agent.cancel("stop")
        events = await idle_events(agent)
        [end] = of_type(events, "turn/end")
        assert end.data.reason == retinue.session.TurnEndReason.aborted("stop")
        [logged] = of_type(events, "tool/result")
        assert isinstance(logged.data, ToolResultEvent)
        assert logged.data.error is not None
        assert logged.data.error.code == "ABORTED"
        assert restarts == []
        assert (await agent.ask("again")).text == "after"
        check_session_invariants(agent.session.events)
