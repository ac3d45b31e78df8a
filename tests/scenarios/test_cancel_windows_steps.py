"""Cancel and dispose in the windows of R7.40 from a step's start on (W6..W8; T-C6, T-C7, T-C9),
and what a step signal kept or misused cannot abort.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Continue, HookContext
from retinue.loop import StepSignal
from retinue.loop._core import abort_step
from retinue.providers import LlmCallConfig
from retinue.session import Event
from retinue.testing import (
    CallTools,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import (
    OPTIONS,
    Next,
    cancel_in_first_turn_on,
    idle_events,
    last_end_reason,
    of_type,
    runtime,
    texts,
    turn_ends,
    types,
    types_without_chunks,
    user_texts,
)


@retinue.tool(parallel_safe=True)
async def pause(seconds: float) -> str:
    """Sleep, then answer.

    Args:
        seconds: How long to sleep.
    """
    await trio.sleep(seconds)
    return "paused"


async def test_w6_cancel_from_step_start_observer_closes_the_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C6 / R7.21 Check D: a cancel from a ``step/start`` observer closes the step; no model call."""
    model = ScriptedModel([Reply("never"), Reply("later")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        cancel_in_first_turn_on(rt, agent, "step/start", "step vetoed")
        result = await agent.ask("doomed")
        events = agent.session.events
        assert types(events) == ["turn/start", "user/message", "step/start", "step/end", "turn/end"]
        assert (result.reason.kind, result.reason.reason) == ("aborted", "step vetoed")
        assert model.statistics().calls == 0
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_w6_dispose_from_step_start_observer_ends_disposed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C6 / R7.21: a disposal started from a ``step/start`` observer ends the turn disposed, no chunk.

    ``dispose`` is async, so it lands at the driver's next checkpoint: the
    model's first-chunk delay.
    """
    model = ScriptedModel([Reply("never", delay=1)])
    async with runtime(model) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)

        def on_event(_session: object, event: Event) -> None:
            if event.type == "step/start":
                nursery.start_soon(agent.dispose)

        rt.hooks.on("session/event", on_event, agent=agent)
        agent.send("doomed")
        events = await idle_events(agent)
        assert of_type(events, "assistant/chunk") == []
        assert of_type(events, "assistant/message") == []
        assert types_without_chunks(events)[-2:] == ["step/end", "turn/end"]
        assert last_end_reason(events).kind == "disposed"
        assert agent.status == "disposed"
        check_session_invariants(events)


@pytest.mark.parametrize("seam", ["agent/request", "request/header"])
async def test_w6_cancel_before_the_request_starts_no_model_call(
    autojump_clock: trio.testing.MockClock, seam: str
) -> None:
    """R7.36, R7.40, R7.43: a cancel from an ``agent/request`` listener, or from an observer of
    the step's ``request/header``, lands before the model is called: no stream is started,
    the step closes and the turn ends ``aborted`` with the caller's reason. A request its
    listener cancelled was never built, so no header is logged for it.
    """
    model = ScriptedModel([Reply("never"), Reply("later")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def on_request(
            agent: retinue.Agent, turn: int, _step: int, config: LlmCallConfig, _proceed: Next
        ) -> LlmCallConfig:
            if turn == 1:
                agent.cancel("not this request")
            return config

        def on_event(_session: object, event: Event) -> None:
            if event.type == "request/header":
                agent.cancel("not this request")

        if seam == "agent/request":
            rt.hooks.on("agent/request", on_request, agent=agent)
        else:
            rt.hooks.on("session/event", on_event, agent=agent)
        result = await agent.ask("doomed")
        events = agent.session.events
        assert (result.reason.kind, result.reason.reason) == ("aborted", "not this request")
        assert model.statistics().calls == 0
        assert of_type(events, "assistant/chunk") == []
        assert types_without_chunks(events)[-2:] == ["step/end", "turn/end"]
        # Cancelled by the request listener, the request was never built: the log names no
        # header for it, and the next turn's request is the first one it holds a header for.
        assert len(of_type(events, "request/header")) == (seam == "request/header")
        assert (await agent.ask("again")).reason.kind == "completed"
        assert len(of_type(agent.session.events, "request/header")) == 1
        check_session_invariants(agent.session.events)


async def test_w7_cancel_mid_stream_keeps_chunks_and_the_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40 W7, R2.28: chunks streamed so far stay logged, no assistant message, the caller's reason is kept."""
    model = ScriptedModel([Hang("partial answer", chunks=3)])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(5)
        agent.cancel("user hit stop")
        events = await idle_events(agent)
        assert len(of_type(events, "assistant/chunk")) >= 3
        assert of_type(events, "assistant/message") == []
        assert types_without_chunks(events)[-2:] == ["step/end", "turn/end"]
        assert last_end_reason(events) == retinue.session.TurnEndReason.aborted("user hit stop")
        assert [m.role for m in agent.session.derive_messages()] == ["user"]
        check_session_invariants(events)


async def test_w7_dispose_during_tools_ends_disposed_with_every_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40 W7, R9.25: disposal during a tool call ends ``disposed`` and leaves no dangling call."""
    model = ScriptedModel([CallTools([ToolCallSpec("pause", '{"seconds": 100}')]), Reply("never")])
    async with runtime(model, tools=[pause]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(10)
        await agent.dispose()
        events = agent.session.events
        assert last_end_reason(events).kind == "disposed"
        assert len(of_type(events, "tool/result")) == 1
        assert model.statistics().calls == 1
        check_session_invariants(events)


async def test_w7_dispose_right_after_a_cancel_during_tools_ends_disposed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.17, R7.39: a disposal landing while a cancel unwinds the tools wins over it: the
    turn ends ``disposed``, in the log and in the ``ask`` answer alike."""
    model = ScriptedModel([CallTools([ToolCallSpec("pause", '{"seconds": 100}')]), Reply("never")])
    answers: list[retinue.TurnResult] = []
    async with runtime(model, tools=[pause]) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)

        async def ask() -> None:
            answers.append(await agent.ask("go"))

        nursery.start_soon(ask)
        await trio.sleep(10)
        assert of_type(agent.session.events, "tool/call") != []
        assert of_type(agent.session.events, "tool/result") == []
        agent.cancel("stop")
        await agent.dispose()
    events = agent.session.events
    reason = last_end_reason(events)
    assert reason == retinue.session.TurnEndReason.disposed()
    assert [answer.reason for answer in answers] == [reason]
    assert [r.data.error.code for r in of_type(events, "tool/result")] == ["ABORTED"]  # type: ignore[union-attr]
    check_session_invariants(events)


async def parked_between_steps(rt: retinue.Runtime, seam: str) -> retinue.Agent:
    """A new agent whose first turn waits in a listener of *seam* (``agent/turn-continuation``
    or ``agent/turn-stop``), sleeping 1000 s after its first step; later calls answer at once."""
    agent = await rt.create_agent("a", OPTIONS)
    entered = trio.Event()

    async def slow(*args: object) -> Any:
        if not entered.is_set():
            entered.set()
            await trio.sleep(1000)
        proceed = args[-1]
        return await proceed() if seam == "agent/turn-continuation" else None  # type: ignore[operator]

    rt.hooks.on(seam, slow, agent=agent)  # type: ignore[call-overload]
    agent.send("go")
    await entered.wait()
    return agent


@pytest.mark.parametrize(
    "where", ["step/end observer", "continuation listener", "turn-stop listener"]
)
async def test_w8_cancel_in_continuation_window_runs_no_further_step(
    autojump_clock: trio.testing.MockClock, where: str
) -> None:
    """T-C7 / R7.30 Check E: a cancel after the step completed ends the turn aborted with no next step."""
    model = ScriptedModel([CallTools([ToolCallSpec("pause", '{"seconds": 1}')]), Reply("never")])
    async with runtime(model, tools=[pause]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def on_event(_session: object, event: Event) -> None:
            if where == "step/end observer" and event.type == "step/end":
                agent.cancel("window 8")

        async def continuation(
            _agent: retinue.Agent, _turn: int, _default: object, proceed: Next
        ) -> Any:
            if where == "continuation listener":
                agent.cancel("window 8")
                return Continue()
            return await proceed()

        def turn_stop(_agent: retinue.Agent, _turn: int) -> None:
            if where == "turn-stop listener":
                agent.cancel("window 8")

        rt.hooks.on("session/event", on_event, agent=agent)
        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        rt.hooks.on("agent/turn-stop", turn_stop, agent=agent)
        result = await agent.ask("go")
        events = agent.session.events
        assert (result.reason.kind, result.reason.reason) == ("aborted", "window 8")
        assert len(of_type(events, "step/start")) == 1
        assert len(of_type(events, "tool/result")) == 1
        assert types_without_chunks(events)[-2:] == ["step/end", "turn/end"]
        assert model.statistics().calls == 1
        check_session_invariants(events)


@pytest.mark.parametrize("seam", ["agent/turn-continuation", "agent/turn-stop"])
async def test_w8_dispose_interrupts_a_slow_listener_between_steps(
    autojump_clock: trio.testing.MockClock, seam: str
) -> None:
    """T-C7 / R2.35, R7.31, DESIGN 4: disposal does not wait for a listener between steps.

    No step window is open there: the turn's own scope is cancelled, and the turn
    ends ``disposed`` at once.
    """
    model = ScriptedModel([CallTools([ToolCallSpec("pause", '{"seconds": 1}')]), Reply("never")])
    async with runtime(model, tools=[pause]) as rt, trio.open_nursery() as nursery:
        agent = await parked_between_steps(rt, seam)
        started = trio.current_time()
        nursery.start_soon(agent.dispose)
        events = await idle_events(agent)
        await agent.dispose()
        assert trio.current_time() - started < 10
        assert last_end_reason(events).kind == "disposed"
        assert model.statistics().calls == 1
        check_session_invariants(events)


@pytest.mark.parametrize("seam", ["agent/turn-continuation", "agent/turn-stop"])
async def test_w8_cancel_interrupts_a_slow_listener_between_steps(
    autojump_clock: trio.testing.MockClock, seam: str
) -> None:
    """T-C7 / R2.23, R7.40 W8: a cancel does not wait for a listener between steps.

    A listener awaiting there (an ``ask`` of another agent, say) is cancelled, as
    one in a step window is, and the turn ends ``aborted`` with the cancel's reason
    at once: the step it follows stays whole, and no step runs after it.
    """
    model = ScriptedModel([CallTools([ToolCallSpec("pause", '{"seconds": 1}')]), Reply("never")])
    async with runtime(model, tools=[pause]) as rt:
        agent = await parked_between_steps(rt, seam)
        started = trio.current_time()
        agent.cancel("stop now")
        events = await idle_events(agent)
        assert trio.current_time() - started < 10
        end = last_end_reason(events)
        assert (end.kind, end.reason) == ("aborted", "stop now")
        assert len(of_type(events, "step/end")) == 1
        assert len(of_type(events, "tool/result")) == 1
        assert model.statistics().calls == 1
        check_session_invariants(events)
        assert (await agent.ask("again")).reason.kind == "completed"


async def test_w8_a_listener_failing_after_its_cancel_ends_the_turn_aborted_and_is_logged(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R7.22, R2.28: a turn-stop listener that cancels the agent, then raises: the cancel came
    first and is the turn's end (as in every window), and the failure is logged, not lost."""
    model = ScriptedModel([CallTools([ToolCallSpec("pause", '{"seconds": 1}')]), Reply("later")])
    async with runtime(model, tools=[pause]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        failed = RuntimeError("turn-stop listener bug")

        def cancel_then_fail(_agent: retinue.Agent, turn: int) -> None:
            if turn == 1:
                agent.cancel("stop first")
                raise failed

        rt.hooks.on("agent/turn-stop", cancel_then_fail, agent=agent)
        with caplog.at_level(logging.ERROR, logger="retinue.loop"):
            result = await agent.ask("go")
        assert (result.reason.kind, result.reason.reason, result.error) == (
            "aborted",
            "stop first",
            None,
        )
        logged = [r for r in caplog.records if r.name == "retinue.loop" and r.exc_info]
        assert [r.getMessage() for r in logged] == [
            f"agent {agent.id}: turn 1 failed while aborted (its end stays the abort)"
        ]
        assert logged[0].exc_info[1] is failed  # type: ignore[index]
        check_session_invariants(agent.session.events)
        assert (await agent.ask("again")).reason.kind == "completed"


async def test_w8_continuation_reason_after_cancel_is_discarded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C7 / R2.25, R7.30: a reason returned with ``Continue`` after a cancel never becomes a prompt.

    The cancel has already cleared both FIFOs; the reason belongs to the turn
    it aborted, so no second turn runs and the model is called once.
    """
    model = ScriptedModel(
        [CallTools([ToolCallSpec("pause", '{"seconds": 1}')]), Reply("never")], repeat_last=True
    )
    async with runtime(model, tools=[pause]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def continuation(
            _agent: retinue.Agent, turn: int, _default: object, proceed: Next
        ) -> Any:
            if turn > 1:
                return await proceed()
            agent.cancel("stop now")
            return Continue(HookContext("keep going"))

        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        result = await agent.ask("go")
        await trio.sleep(5)
        events = await idle_events(agent)
        assert (result.reason.kind, result.reason.reason) == ("aborted", "stop now")
        assert turn_ends(events) == ["aborted"]
        assert user_texts(events) == ["go"]
        assert model.statistics().calls == 1
        check_session_invariants(events)


async def test_w8_dispose_in_continuation_window_ends_disposed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C7 / R7.31: a disposal during the continuation seam ends the turn ``disposed`` with no next step."""
    model = ScriptedModel([CallTools([ToolCallSpec("pause", '{"seconds": 1}')]), Reply("never")])
    async with runtime(model, tools=[pause]) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)
        disposed = trio.Event()
        rt.hooks.on(
            "agent/status", lambda _a, s: disposed.set() if s == "disposed" else None, agent=agent
        )

        async def continuation(
            _agent: retinue.Agent, _turn: int, _default: object, proceed: Next
        ) -> Any:
            nursery.start_soon(agent.dispose)
            await disposed.wait()
            return await proceed()

        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        agent.send("go")
        await disposed.wait()
        events = await idle_events(agent)
        assert last_end_reason(events).kind == "disposed"
        assert len(of_type(events, "step/start")) == 1
        assert model.statistics().calls == 1
        check_session_invariants(events)


async def test_cancel_discards_steering_of_the_cancelled_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C9 / R2.25, R3.12: steering pending at a mid-tool cancel is discarded, never re-delivered."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("pause", '{"seconds": 50}')]), Reply("next turn")]
    )
    async with runtime(model, tools=[pause]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(10)
        agent.steer("please also do this")
        agent.cancel("stop")
        await agent.wait_idle()
        result = await agent.ask("fresh start")
        events = agent.session.events
        assert turn_ends(events) == ["aborted", "completed"]
        assert result.turn == 2
        every_text = " ".join(texts(m.content) for m in model.requests[-1].messages)
        assert "please also do this" not in every_text
        assert of_type(events, "steering/message") == []
        check_session_invariants(events)


@retinue.tool(parallel_safe=True)
async def messy(seconds: float) -> str:
    """Wait with a helper task whose cleanup fails when it is cancelled.

    Args:
        seconds: How long to wait.
    """

    async def helper() -> None:
        try:
            await trio.sleep(seconds)
        except trio.Cancelled:
            raise OSError("connection reset during cleanup") from None

    async with trio.open_nursery() as nursery:
        nursery.start_soon(helper)
        await trio.sleep(seconds)
    return "done"


async def test_cancel_during_a_tool_whose_cleanup_fails_is_still_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A failure raised while the abort unwinds the tools ends the turn aborted, not error (R7.22, W7)."""
    model = ScriptedModel([CallTools([ToolCallSpec("messy", '{"seconds": 100}')]), Reply("never")])
    errors: list[object] = []
    async with runtime(model, tools=[messy]) as rt:
        rt.hooks.on("agent/error", lambda *args: errors.append(args))
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(10)
        agent.cancel("stop it")
        events = await idle_events(agent)
        check_session_invariants(events)
        assert turn_ends(events) == ["aborted"]
        assert last_end_reason(events) == retinue.session.TurnEndReason.aborted("stop it")
        assert [r.data.error.code for r in of_type(events, "tool/result")] == ["ABORTED"]
        assert errors == []


async def test_a_signal_aborted_after_its_step_ended_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A step signal kept past its step (a late watchdog) cannot abort a later window (R7.15, R7.41)."""
    model = ScriptedModel([CallTools([ToolCallSpec("pause", '{"seconds": 1}')]), Reply("second")])
    saved: list[object] = []
    async with runtime(model, tools=[pause]) as rt:

        async def pre_step(*args: object) -> None:
            saved.append(args[-1])
            await trio.lowlevel.checkpoint()

        async def continuation(*args: object) -> Any:
            if len(saved) == 1:
                assert isinstance(saved[0], StepSignal)
                abort_step(saved[0])
            await trio.lowlevel.checkpoint()
            return await args[-1]()  # type: ignore[operator]

        rt.hooks.on("agent/pre-step", pre_step)
        rt.hooks.on("agent/turn-continuation", continuation)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        assert result.text == "second"
        assert not saved[0].cancel_called  # type: ignore[attr-defined]
        check_session_invariants(agent.session.events)


async def test_a_listener_cannot_abort_its_step_through_the_signal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.41: the signal is the listener's to read; aborting is ``agent.cancel``'s, which gives the
    turn its reason. A listener's ``signal.abort()`` or ``cancel_called = True`` is refused, as the
    listener's failure, rather than ending a live agent's turn as ``disposed``, and the agent serves
    on."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    tried: list[str] = []
    async with runtime(model) as rt:

        async def pre_step(*args: object) -> None:
            signal = args[-1]
            for attempt in ("abort", "cancel_called"):
                try:
                    if attempt == "abort":
                        signal.abort()  # type: ignore[attr-defined]
                    else:
                        signal.cancel_called = True  # type: ignore[attr-defined]
                except AttributeError:
                    tried.append(attempt)
            await trio.lowlevel.checkpoint()

        rt.hooks.on("agent/pre-step", pre_step)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
    assert tried == ["abort", "cancel_called"]
    assert (result.reason.kind, result.text) == ("completed", "ok")
