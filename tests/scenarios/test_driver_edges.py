"""Driver edges: a fresh or restarted driver, disposal mid-turn, a bug in a turn's error handling.

(SPEC R2.32, R3.10, R7.4, R7.45, R7.49; DESIGN 4.) As in test_supervisor.py, a
driver crash is a bug in retinue itself, so the crash tests monkeypatch a private
function to raise, and each says which one it breaks.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue.loop import _core, _driver, _state
from retinue.session import Session
from retinue.testing import (
    CallTools,
    FinishWithError,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import (
    OPTIONS,
    last_end_reason,
    nap,
    of_type,
    record_statuses,
    runtime,
    turn_ends,
    user_texts,
)


class DriverBugError(RuntimeError):
    """The simulated bug."""


@attrs.define(eq=False)
class BeforeFirstRun(trio.abc.Instrument):
    """Run *action* synchronously just before the task named *name* takes its first step."""

    name: str
    action: Any
    fired: bool = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if not self.fired and task.name == self.name:
            self.fired = True
            self.action()


def record(rt: retinue.Runtime, agent: retinue.Agent, name: str) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    rt.hooks.on(name, lambda _agent, *args: seen.append(args), agent=agent)  # type: ignore[call-overload]
    return seen


async def test_a_cancel_before_a_fresh_drivers_first_run_releases_wait_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.32 / R7.4: a cancel that empties the queue before a new driver first runs settles ``wait_idle``.

    ``create_agent`` returns before the agent's driver task has stepped. A
    prompt is sent, a waiter registers, and the cancel lands just before the
    driver's first step: the driver starts with nothing queued and no wake-up
    coming. It must pass window 1 all the same: the waiter resolves, with no
    status event and nothing logged.
    """
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        instrument = BeforeFirstRun(f"agent {agent.id}", lambda: agent.cancel("never mind"))
        trio.lowlevel.add_instrument(instrument)
        try:
            agent.send("doomed")
            with trio.move_on_after(60) as waiting:
                await agent.wait_idle()
        finally:
            trio.lowlevel.remove_instrument(instrument)
        assert instrument.fired, "the driver ran before the cancel: the edge was not reached"
        assert not waiting.cancelled_caught, "wait_idle was never released"
        assert list(agent.session.events) == []
        assert statuses == []
        assert model.statistics().calls == 0
        result = await agent.ask("next")
        assert result.reason.kind == "completed"
        assert result.turn == 1


async def test_an_ask_cancelled_before_it_is_called_sends_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ``ask`` whose deadline has already passed sends nothing, as a channel's
    ``send`` would: no turn runs, no model call is paid for an answer nobody reads.
    One cancelled once its prompt is sent leaves the prompt to run."""
    model = ScriptedModel([Reply("answer", delay=1)], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        with trio.move_on_after(0):
            await agent.ask("expensive question")
        await agent.wait_idle()
        assert agent.session.events == []
        assert model.requests == []
        with trio.move_on_after(0.5) as waiting:
            await agent.ask("a question left to run")
        assert waiting.cancelled_caught
        await agent.wait_idle()
        assert user_texts(agent.session.events) == ["a question left to run"]
        assert turn_ends(agent.session.events) == ["completed"]
        assert len(model.requests) == 1


async def test_disposing_a_running_agent_flushes_its_last_turn_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.49, R2.36: disposal mid-turn gets one flush checkpoint, after ``turn/end``; a failure is reported once.

    The ``session/flush`` listener fails like a full disk. The disposed turn's
    flush is the driver's post-turn flush; disposal must not run a second one
    beside it, which would report the one failure twice on ``agent/error``.
    """
    async with runtime(ScriptedModel([Hang()])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        flushed: list[tuple[str, bool]] = []

        async def on_flush(_agent: retinue.Agent, session: Session) -> None:
            flushed.append((session.events[-1].type, session.is_turn_open))
            await trio.lowlevel.checkpoint()
            raise OSError("disk full")

        rt.hooks.on("session/flush", on_flush, agent=agent)
        agent.send("hi")
        await trio.sleep(1)
        await agent.dispose()
    assert turn_ends(agent.session.events) == ["disposed"]
    assert flushed == [("turn/end", False)]
    assert [(turn, type(error)) for turn, _step, error in errors] == [(1, OSError)]


async def test_a_steer_sent_after_a_cancel_in_a_restart_pause_becomes_the_next_prompt(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R3.10, R7.4, R2.14 after a crash: a steer sent in the restart pause is not stranded.

    Breaks ``_driver._guarded_turn`` twice, so the second restart waits out a
    back-off pause with a prompt queued: the agent still reads ``running``. A
    cancel then discards that prompt and a steer lands in the steering FIFO.
    The restarted driver must run the steer as an ordinary prompt, and
    ``wait_idle`` return only after that turn.
    """
    real = _driver._guarded_turn
    crashes: list[int] = []

    async def guarded(core: _core.AgentCore, state: Any, items: Any) -> bool:
        if len(crashes) < 2:
            crashes.append(1)
            await trio.sleep(1)
            raise DriverBugError(f"guarded_turn bug #{len(crashes)}")
        return await real(core, state, items)

    monkeypatch.setattr(_driver, "_guarded_turn", guarded)
    policy = retinue.RestartPolicy(max_restarts=5, backoff=10)
    model = ScriptedModel([Reply("done")], repeat_last=True)
    async with runtime(model, restart=policy) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("one")  # crash 1 at t=1 ("two" queued): restarted at once
        await trio.sleep(0.5)
        agent.send("two")  # drained by the restarted driver: crash 2 at t=2
        await trio.sleep(1)
        agent.send("three")  # queued at crash 2: the pause keeps the agent "running"
        await trio.sleep(1)
        paused = agent.status
        assert len(crashes) == 2
        assert paused == "running"
        agent.cancel("never mind")
        agent.steer("four")
        await agent.wait_idle()
        events = agent.session.events
        assert user_texts(events) == ["four"]
        assert of_type(events, "steering/message") == []
        assert turn_ends(events) == ["completed"]
        assert agent.status == "idle"
        check_session_invariants(events)


async def test_a_bug_in_a_turns_error_handling_closes_it_as_a_driver_crash(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R7.45, R7.47: a bug escaping the turn's own error handling is a crash, not a disposal.

    Breaks ``TurnState.record_error``; a model error then makes the turn's
    error handling raise. Nothing disposed the agent: the supervisor closes
    the turn ``error``/``DRIVER_CRASH``, the ask gets that same turn and reason, and the restarted
    driver serves the next prompt.
    """
    model = ScriptedModel([FinishWithError("boom"), Reply("fine")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        restarts = record(rt, agent, "agent/restarted")

        def broken(self: _state.TurnState, error: BaseException) -> None:
            raise DriverBugError("record_error bug")

        monkeypatch.setattr(_state.TurnState, "record_error", broken)
        result = await agent.ask("go")
        monkeypatch.undo()
        reason = last_end_reason(agent.session.events)
        assert (reason.kind, reason.code) == ("error", "DRIVER_CRASH")
        assert "record_error bug" in str(reason.message)
        # The ask gets the answer the log gives: the same turn and reason.
        assert (result.turn, result.reason) == (1, reason)
        assert [type(error) for (error,) in restarts] == [DriverBugError]
        assert result.error is restarts[0][0]
        again = await agent.ask("again")
        assert again.reason.kind == "completed"
        assert again.turn == 2
        assert agent.status == "idle"
        check_session_invariants(agent.session.events)


async def test_a_bug_noting_a_steps_answer_leaves_no_call_without_its_message(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R4.15, R7.45, R9.25: a bug in the turn's own bookkeeping of an assistant message
    (``TurnState.note_answer``, before the message is logged) ends the turn ``error`` with a valid
    log: the message's tool calls are not taken as logged, so closing the step logs no ``tool/call``
    and result for a message the log never had.
    """

    def broken(self: _state.TurnState, content: Any, usage: Any) -> None:
        raise DriverBugError("note_answer bug")

    model = ScriptedModel([CallTools([ToolCallSpec("nap", "{}", id="c1")]), Reply("fine")])
    async with runtime(model, tools=[nap]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        monkeypatch.setattr(_state.TurnState, "note_answer", broken)
        result = await agent.ask("go")
        monkeypatch.undo()
        assert (result.reason.kind, result.reason.message) == ("error", "note_answer bug")
        check_session_invariants(agent.session.events)
        assert of_type(agent.session.events, "tool/call") == []
        assert (await agent.ask("again")).reason.kind == "completed"
