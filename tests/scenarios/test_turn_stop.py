"""The terminal ``agent/turn-stop`` seam (SPEC R7.37, R3.11; the turn-stop checklist)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Continue, HookContext, MessageSource, Stop
from retinue.session import Session, TurnEndReason
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import (
    DEADLINE,
    OPTIONS,
    Next,
    echo,
    idle_events,
    of_type,
    runtime,
    turn_ends,
    user_texts,
)
from tests.scenarios._supervisor_kit import crash_in_the_post_turn_flush


async def test_turn_stop_runs_after_continuation_and_discards_terminal_steering(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Turn stop / R7.29, R7.37, R3.11: stop wins over tool calls and continue-reason steering, which is dropped."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("never"), Reply("next turn")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        order: list[str] = []

        def continuation(handle: Any, _turn: int, _default: object, _next: Next) -> Continue:
            order.append("continuation")
            handle.steer("steer from continuation")
            return Continue(HookContext("keep going", MessageSource("plugin", "nudger")))

        def turn_stop(_agent: object, turn: int) -> Stop:
            order.append(f"turn-stop {turn}")
            return Stop()

        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        unregister = rt.hooks.on("agent/turn-stop", turn_stop, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        assert order == ["continuation", "turn-stop 1"]
        events = agent.session.events
        assert model.statistics().calls == 1
        assert of_type(events, "steering/message") == []
        assert len(of_type(events, "tool/result")) == 1
        await agent.wait_idle()
        assert len(of_type(events, "turn/start")) == 1
        unregister()
        second = await agent.ask("again")
        assert second.turn == 2
        assert user_texts(agent.session.events) == ["go", "again"]
        check_session_invariants(agent.session.events)


async def test_turn_stop_discards_steering_arriving_from_the_flush(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Turn stop / R3.11, R7.13: steering that arrives during the post-turn flush of a stopped turn is discarded."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        flushes = 0

        async def flush(handle: Any, _session: Session) -> None:
            nonlocal flushes
            flushes += 1
            await trio.lowlevel.checkpoint()
            if flushes == 1:
                assert handle.status == "running"
                handle.steer("steer during flush")

        rt.hooks.on("session/flush", flush, agent=agent)
        rt.hooks.on("agent/turn-stop", lambda _agent, _turn: Stop(), agent=agent)
        agent.send("go")
        events = await idle_events(agent)
        assert turn_ends(events) == ["completed"]
        assert user_texts(events) == ["go"]
        assert model.statistics().calls == 1


async def test_turn_stop_keeps_ordinary_sends_arriving_during_the_flush(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Turn stop / R3.11: a stopped turn only discards steering; a send made during its flush runs next."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        flushes = 0

        async def flush(handle: Any, _session: Session) -> None:
            nonlocal flushes
            flushes += 1
            await trio.lowlevel.checkpoint()
            if flushes == 1:
                handle.send("queued during flush")
                handle.steer("steer during flush")

        rt.hooks.on("session/flush", flush, agent=agent)
        rt.hooks.on("agent/turn-stop", lambda _agent, _turn: Stop(), agent=agent)
        agent.send("go")
        events = await idle_events(agent)
        assert turn_ends(events) == ["completed", "completed"]
        assert user_texts(events) == ["go", "queued during flush"]
        assert of_type(events, "steering/message") == []


async def test_turn_stop_scoped_listener_hears_only_its_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Turn stop / R6.5: a listener scoped to one agent neither hears nor stops another agent."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        stopped = await rt.create_agent("stopped", OPTIONS)
        free = await rt.create_agent("free", OPTIONS)
        heard: list[str] = []

        def turn_stop(handle: Any, _turn: int) -> Stop:
            heard.append(handle.id)
            return Stop()

        rt.hooks.on("agent/turn-stop", turn_stop, agent=stopped)
        continued: dict[str, int] = {}

        def continue_twice(handle: Any, _turn: int, _default: object, _next: Next) -> Any:
            continued[handle.id] = continued.get(handle.id, 0) + 1
            return Continue() if continued[handle.id] <= 2 else Stop()

        rt.hooks.on("agent/turn-continuation", continue_twice)
        await stopped.ask("go")
        await free.ask("go")
        assert heard == [stopped.id]
        assert len(of_type(stopped.session.events, "step/start")) == 1
        assert len(of_type(free.session.events, "step/start")) == 3


async def test_turn_stop_listener_unregisters_with_its_owner(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Turn stop / R12.9, T-F8: a listener tied to the agent's lifetime is gone once the agent is disposed."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:

        def setup(agent: retinue.Agent) -> None:
            rt.scoped(agent, rt.hooks.on("agent/turn-stop", lambda _a, _t: Stop(), agent=agent))

        agent = await rt.create_agent("a", OPTIONS, setup=setup)
        assert rt.hooks.has_listeners("agent/turn-stop")
        await agent.ask("go")
        await agent.dispose()
        assert not rt.hooks.has_listeners("agent/turn-stop")


@pytest.mark.parametrize(
    "verdict",
    [RuntimeError("turn-stop exploded"), Continue(), False, 0, "stop", {"action": "stop"}],
    ids=["raises", "continue", "false", "zero", "string", "dict"],
)
async def test_turn_stop_raising_or_malformed_result_fails_the_turn_closed(
    autojump_clock: trio.testing.MockClock, verdict: object
) -> None:
    """Turn stop / R7.37, R6.2, R6.7: a raise or any non-``None``, non-``Stop`` result ends the turn ``error``; the driver survives."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        armed = True

        def turn_stop(_agent: object, _turn: int) -> Any:
            if not armed:
                return None
            if isinstance(verdict, BaseException):
                raise verdict
            return verdict

        rt.hooks.on("agent/turn-stop", turn_stop, agent=agent)
        first = await agent.ask("go")
        assert first.reason.kind == "error"
        assert first.reason.step == 1
        if isinstance(verdict, BaseException):
            assert first.reason.message == "turn-stop exploded"
        else:
            assert "turn_stop) returned " in (first.reason.message or "")
            assert (first.reason.message or "").endswith(", not None or Stop")
        armed = False
        second = await agent.ask("again")
        assert second.reason == TurnEndReason.completed()
        check_session_invariants(agent.session.events)


class _Unshowable:
    def __repr__(self) -> str:
        raise RuntimeError("repr exploded")


@pytest.mark.parametrize(
    ("verdict", "shown"),
    [("x" * 10_000, "'xxxxxxxx"), (_Unshowable(), "a _Unshowable that cannot be shown")],
    ids=["long", "unshowable"],
)
async def test_turn_stop_invalid_result_is_shown_short_in_the_turn_error(
    autojump_clock: trio.testing.MockClock, verdict: object, shown: str
) -> None:
    """R7.37: the invalid result is shown cut short in the turn's logged error (not logged whole,
    however long), and one whose repr raises is named by its type (the repr's own error does not
    take the place of the invalid-result error)."""
    model = ScriptedModel([Reply("one")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def turn_stop(_agent: object, _turn: int) -> Any:
            return verdict

        rt.hooks.on("agent/turn-stop", turn_stop, agent=agent)
        result = await agent.ask("go")
        message = result.reason.message or ""
        assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
        assert message.startswith("an agent/turn-stop listener (")
        assert shown in message
        assert len(message) < 300
        check_session_invariants(agent.session.events)


async def test_turn_stop_discards_steering_in_the_turn_so_a_crashed_flush_leaves_none(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turn stop / R3.11, R7.37: a terminal stop discards pending steering at the in-turn
    checkpoint, not only after the flush: a driver crash in the post-turn flush, whose restart
    requeues what a turn left (R3.10), finds no steering to start another turn with.

    Breaks the driver's post-turn flush once (``crash_in_the_post_turn_flush``).
    """
    crashes = crash_in_the_post_turn_flush(monkeypatch)
    model = ScriptedModel([Reply("one"), Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def continuation(handle: Any, _turn: int, _default: object, _next: Next) -> Stop:
            handle.steer("steer from continuation")
            return Stop()

        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        rt.hooks.on("agent/turn-stop", lambda _agent, _turn: Stop(), agent=agent)
        with trio.fail_after(DEADLINE):
            result = await agent.ask("go")
            await trio.sleep(10)
            await agent.wait_idle()
        assert (crashes, result.text) == ([1], "one")
        events = agent.session.events
        assert turn_ends(events) == ["completed"]
        assert user_texts(events) == ["go"]
        assert of_type(events, "steering/message") == []
        assert model.statistics().calls == 1
