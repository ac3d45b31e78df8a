"""Contract regressions: step-result rewrites, an abort inside a tool, steering, raising
continuation listeners and flushes (SPEC 7.7, 9; T-X1..T-X4).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Message, Stop, Text, ToolCall
from retinue.session import AssistantMessage, Event, Session, ToolCallEvent, TurnEndReason
from retinue.testing import (
    CallTools,
    FinishWithError,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from retinue.tools import ToolContext
from tests.helpers import (
    OPTIONS,
    Next,
    echo,
    idle_events,
    last_end_reason,
    of_type,
    runtime,
    texts,
    turn_ends,
    types_without_chunks,
    user_texts,
)
from tests.scenarios._regressions_kit import _results, ping

# -- T-X1 --------------------------------------------------------------------------------


async def test_step_result_with_invalid_content_ends_the_turn_without_orphan_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36, R7.45, R4.15: a rewrite whose content is not all blocks is an invalid hook result.

    Nothing of it is logged, so no tool call is registered and no synthetic
    result answers a call that no assistant message carries.
    """
    model = ScriptedModel([Reply("hello")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        broken = Message("assistant", (ToolCall("c1", "echo", "{}"), "not a block"))  # type: ignore[arg-type]

        async def rewrite(*_args: object) -> Message:
            return broken

        rt.hooks.on("agent/step-result", rewrite, agent=agent)
        result = await agent.ask("go")
        events = agent.session.events
        assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
        assert of_type(events, "assistant/message") == []
        assert of_type(events, "tool/call") == of_type(events, "tool/result") == []
        assert [m.role for m in agent.session.derive_messages()] == ["user"]
        check_session_invariants(events)


@pytest.mark.parametrize("role", ["user", "system"])
async def test_step_result_rewrite_with_another_role_is_an_invalid_hook_result(
    autojump_clock: trio.testing.MockClock, role: str
) -> None:
    """R7.36, R6.3: the step's message is the assistant's: a rewrite given another role
    is refused, not logged as the assistant's with its role silently dropped."""
    model = ScriptedModel([Reply("hello")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def rewrite(*_args: object) -> Message:
            return Message(role, (Text("spoken for the user"),))  # type: ignore[arg-type]

        unregister = rt.hooks.on("agent/step-result", rewrite, agent=agent)
        result = await agent.ask("go")
        assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
        assert f"{role} message" in (result.reason.message or "")
        assert of_type(agent.session.events, "assistant/message") == []
        unregister()
        assert (await agent.ask("again")).text == "hello"
        check_session_invariants(agent.session.events)


async def test_step_result_rewrite_is_what_log_history_and_tools_see(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X1 / R7.36: the ``agent/step-result`` rewrite is logged, derived and dispatched; the raw one is not."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "original"}', id="c1")]), Reply("done")]
    )
    async with runtime(model, tools=[echo, ping]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rewritten = Message(
            "assistant",
            (
                Text("let me check"),
                ToolCall("c1", "echo", '{"text": "rewritten"}'),
                ToolCall("c9", "ping", ""),
            ),
        )

        async def rewrite(
            _agent: object, turn: int, step: int, message: Message, next_: Next
        ) -> Message:
            original = await next_()
            return rewritten if (turn, step) == (1, 1) else original

        rt.hooks.on("agent/step-result", rewrite, agent=agent)
        await agent.ask("go")
        events = agent.session.events
        logged = of_type(events, "assistant/message")[0].data
        assert isinstance(logged, AssistantMessage)
        assert logged.content == rewritten.content
        calls = [e.data for e in of_type(events, "tool/call") if isinstance(e.data, ToolCallEvent)]
        assert [(c.call_id, c.name, c.arguments) for c in calls] == [
            ("c1", "echo", '{"text": "rewritten"}'),
            ("c9", "ping", ""),
        ]
        assert [r.content for r in _results(events)] == [
            (Text("echo: rewritten"),),
            (Text("pong"),),
        ]
        history = list(agent.session.derive_messages())
        assert history[1] == rewritten
        assert model.requests[1].messages[1] == rewritten
        assert "original" not in repr(model.requests[1].messages)


# -- T-X2 --------------------------------------------------------------------------------


async def test_abort_inside_a_tool_prevents_the_remaining_tools_and_the_next_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X2 / R9.20, R9.21: a tool cancelling its agent stops later calls and the next model request."""
    ran: list[str] = []

    @retinue.tool
    async def stopper(ctx: ToolContext) -> str:
        """Cancel the calling agent, then keep working."""
        ran.append("stopper")
        ctx.agent.cancel("tool pulled the plug")
        await trio.sleep(10)
        ran.append("stopper finished")
        return "unreachable"

    @retinue.tool
    async def after() -> str:
        """Must never run."""
        ran.append("after")
        await trio.lowlevel.checkpoint()
        return "ran"

    model = ScriptedModel(
        [
            CallTools(
                [ToolCallSpec("stopper", "{}", id="c1"), ToolCallSpec("after", "{}", id="c2")]
            ),
            Reply("never"),
        ]
    )
    async with runtime(model, tools=[stopper, after]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason == TurnEndReason.aborted("tool pulled the plug")
        assert ran == ["stopper"]
        assert model.statistics().calls == 1
        errors = {r.call_id: r.error for r in _results(agent.session.events)}
        assert errors["c1"] is not None
        assert errors["c1"].code == "ABORTED"
        assert errors["c2"] is not None
        assert errors["c2"].code == "ABORTED_BEFORE_DISPATCH"
        check_session_invariants(agent.session.events)


# -- T-X3 --------------------------------------------------------------------------------


async def test_a_raising_observer_loses_no_steering_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.5, R4.8, R7.46: every drained steering message is logged even if an observer raises on one."""
    model = ScriptedModel([Reply("first", delay=5), Reply("second")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def fail_on_steering(_session: object, event: Event) -> None:
            if event.type == "steering/message":
                raise RuntimeError("observer failed")

        rt.hooks.on("session/event", fail_on_steering, agent=agent)
        agent.send("go")
        await trio.sleep(1)
        agent.steer("one")
        agent.steer("two")
        events = await idle_events(agent)
        steered = [e.data for e in of_type(events, "steering/message")]
        assert [texts(data.content) for data in steered] == ["one", "two"]  # type: ignore[union-attr]
        assert last_end_reason(events).kind == "error"
        check_session_invariants(events)


async def test_steering_from_continuation_listener_overrides_stop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X3 / R7.28: a steer from a continuation listener that returns ``Stop`` still runs the next step."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        calls = 0

        def late_steer(handle: Any, _turn: int, _default: object, _next: Next) -> Stop:
            nonlocal calls
            calls += 1
            if calls == 1:
                handle.steer("one more thing")
            return Stop()

        rt.hooks.on("agent/turn-continuation", late_steer, agent=agent)
        result = await agent.ask("go")
        assert result.text == "two"
        assert len(of_type(agent.session.events, "turn/start")) == 1
        assert len(of_type(agent.session.events, "step/start")) == 2
        assert len(of_type(agent.session.events, "steering/message")) == 1


async def test_steering_from_step_end_observer_runs_a_next_step_in_the_same_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X3 / R7.28: a steer from a ``step/end`` observer continues the turn with another step."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        steered = False

        def observer(_session: Session, event: Event) -> None:
            nonlocal steered
            if event.type == "step/end" and not steered:
                steered = True
                agent.steer("after step one")

        rt.hooks.on("session/event", observer, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        kinds = types_without_chunks(agent.session.events)
        assert kinds.count("turn/start") == 1
        assert kinds.count("step/start") == 2
        first_end = kinds.index("step/end")
        assert kinds[first_end + 1 : first_end + 3] == ["steering/message", "step/start"]


async def test_steering_from_turn_end_observer_becomes_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X3 / R3.10, R7.50: a steer arriving from a ``turn/end`` observer starts the next turn as a prompt."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        steered = False

        def observer(_session: Session, event: Event) -> None:
            nonlocal steered
            if event.type == "turn/end" and not steered:
                steered = True
                agent.steer("too late for turn one")

        rt.hooks.on("session/event", observer, agent=agent)
        agent.send("go")
        events = await idle_events(agent)
        assert turn_ends(events) == ["completed", "completed"]
        assert user_texts(events) == ["go", "too late for turn one"]
        assert of_type(events, "steering/message") == []


@pytest.mark.parametrize("sent_after", [(), ("then do this",)], ids=["alone", "then-a-send"])
async def test_steering_queued_during_a_failed_step_is_redelivered_as_the_next_turn(
    autojump_clock: trio.testing.MockClock, sent_after: tuple[str, ...]
) -> None:
    """T-X3 / R3.12, R3.10, R3.8: steering that arrived in a step which then failed becomes
    the next turn's prompt, before a prompt sent after it (not behind it)."""
    model = ScriptedModel(
        [FinishWithError("overloaded", "OVERLOADED", delay=5), Reply("recovered")]
    )
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        agent.steer("are you there?")
        await trio.sleep(1)
        for text in sent_after:
            agent.send(text)
        events = await idle_events(agent)
        assert turn_ends(events) == ["error", "completed"]
        assert user_texts(events) == ["go", "are you there?", *sent_after]
        assert of_type(events, "steering/message") == []


# -- T-X4 --------------------------------------------------------------------------------


async def test_raising_continuation_listener_fails_the_turn_and_the_driver_survives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X4 / R7.26, R7.48: a raising continuation listener ends the turn ``error`` after a closed step."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        armed = True

        def explode(_agent: object, _turn: int, _default: object, next_: Next) -> Awaitable[Any]:
            if armed:
                raise RuntimeError("continuation exploded")
            return next_()

        rt.hooks.on("agent/turn-continuation", explode, agent=agent)
        first = await agent.ask("go")
        assert first.reason == TurnEndReason.error(1, "continuation exploded")
        assert types_without_chunks(agent.session.events)[-2:] == ["step/end", "turn/end"]
        armed = False
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_rejecting_flush_is_reported_and_the_agent_survives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X4 / R7.49: a failing flush is reported on ``agent/error`` only; nothing is logged after ``turn/end``."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        failure = OSError("disk full")
        armed = True
        reported: list[tuple[int, int, BaseException]] = []

        async def flush(_agent: object, _session: Session) -> None:
            await trio.lowlevel.checkpoint()
            if armed:
                raise failure

        rt.hooks.on("session/flush", flush, agent=agent)
        rt.hooks.on(
            "agent/error",
            lambda _a, turn, step, error: reported.append((turn, step, error)),
            agent=agent,
        )
        first = await agent.ask("go")
        assert first.reason.kind == "completed"
        assert reported == [(1, 1, failure)]
        assert agent.session.events[-1].type == "turn/end"
        armed = False
        assert (await agent.ask("again")).reason.kind == "completed"
        assert len(reported) == 1
