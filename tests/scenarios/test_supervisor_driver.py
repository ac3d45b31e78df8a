"""Driver supervision: a crashed driver's turn closed and its prompt settled, the driver
restarted on its log, or its agent given up (DESIGN 4; SPEC R7.48, R12.9).

A driver crash is a bug in retinue itself: every turn-level failure is
contained by the driver (R7.44-R7.48), so no public input can make a driver
crash. The crash tests therefore monkeypatch a private driver function to
raise; that is the only honest way to inject such a bug, and each test says
which function it breaks.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.loop import _core, _driver, _state, _turn
from retinue.session import Event, RequestHeader, ToolResultEvent, TurnEnd
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    FinishWithError,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, Next, nap, of_type, runtime, turn_ends, user_texts
from tests.scenarios._supervisor_kit import (
    DriverBugError,
    SlowFlushStore,
    crash_in_the_post_turn_flush,
    record,
)


def crash_on_running(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make ``AgentCore.set_status("running")`` raise *times* times (a bug in the driver loop)."""
    real = _core.AgentCore.set_status
    crashes: list[int] = []

    def set_status(self: _core.AgentCore, status: Any) -> None:
        if status == "running" and len(crashes) < times:
            crashes.append(1)
            raise DriverBugError(f"set_status bug #{len(crashes)}")
        real(self, status)

    monkeypatch.setattr(_core.AgentCore, "set_status", set_status)
    return crashes


async def crash_while_a_tool_runs(agent: retinue.Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """Send a prompt whose first tool runs 100s, and cancel it 10s in with
    ``TurnState.answer_dangling_calls`` broken: the bug escapes the open turn."""

    def broken(self: _state.TurnState, code: str, text: str) -> None:
        raise DriverBugError("answer_dangling_calls bug")

    monkeypatch.setattr(_state.TurnState, "answer_dangling_calls", broken)
    agent.send("go")
    await trio.sleep(10)
    agent.cancel("stop")
    await agent.wait_idle()
    monkeypatch.undo()


def headers(events: Any) -> list[str]:
    return [
        e.data.reason
        for e in of_type(events, "request/header")
        if isinstance(e.data, RequestHeader)
    ]


async def test_supervisor_restarts_a_crashed_driver_on_its_log(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4 / R11.16: a crash is reported on ``agent/error``, the driver restarts and resumes the log.

    Breaks ``AgentCore.set_status`` for one ``running`` transition. The queued
    prompt survives the crash; the restarted driver anchors its first request
    with a ``resume`` header and turn numbers continue.
    """
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        restarts = record(rt, agent, "agent/restarted")
        assert (await agent.ask("first")).reason.kind == "completed"
        crashes = crash_on_running(monkeypatch, times=1)
        result = await agent.ask("second")
        assert crashes == [1]
        assert result.reason.kind == "completed"
        assert result.turn == 2
        assert result.text == "two"
        assert len(errors) == 1
        assert isinstance(errors[0][-1], DriverBugError)
        assert len(restarts) == 1
        assert rt.agents.get(agent.id) is agent
        assert agent.status == "idle"
        events = agent.session.events
        assert headers(events) == ["initial", "resume"]
        assert turn_ends(events) == ["completed", "completed"]
        check_session_invariants(events)


async def test_supervisor_closes_the_open_turn_of_a_crashed_driver(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R9.25: a bug escaping an open turn closes it ``error``/``DRIVER_CRASH``; calls are answered.

    Breaks ``TurnState.answer_dangling_calls`` (the abort path's own helper),
    then cancels while a tool runs: the bug escapes the turn after
    ``turn/start``. The supervisor must answer the running call, close the
    step and the turn with code ``DRIVER_CRASH``, report the crash and restart
    the driver, whose next request logs a ``resume`` header.
    """
    model = ScriptedModel(
        [CallTools([ToolCallSpec("nap", '{"seconds": 100}', id="c1")]), Reply("after")]
    )
    store = MemoryStore()
    async with runtime(model, tools=[nap], store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        await crash_while_a_tool_runs(agent, monkeypatch)
        events = agent.session.events
        check_session_invariants(events)
        assert not agent.session.is_turn_open, "the crashed turn was left open"
        end = of_type(events, "turn/end")[-1].data
        assert isinstance(end, TurnEnd)
        assert end.reason.kind == "error"
        assert end.reason.code == "DRIVER_CRASH"
        (answer,) = [e.data for e in of_type(events, "tool/result")]
        assert isinstance(answer, ToolResultEvent)
        assert answer.call_id == "c1"
        assert answer.is_error
        assert any(isinstance(args[-1], DriverBugError) for args in errors)
        await trio.sleep(1)
        assert store.statistics().buffered_events == 0, "the closing events wait for a turn"
        result = await agent.ask("again")
        assert result.reason.kind == "completed"
        assert result.turn == 2
        assert headers(agent.session.events) == ["initial", "resume"]
        check_session_invariants(agent.session.events)


async def test_closing_a_crashed_turn_sources_each_result_at_its_logged_call(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R9.17, R4.22: the closing events of a crashed turn are appended one by one;
    an observer logging an event of its own after each result moves the later ones, and
    each synthetic ``tool/result`` still names the ``tool/call`` it answers as its source.

    Breaks ``TurnState.answer_dangling_calls``, as above, while the first of two
    exclusive calls runs: the second is logged and answered by the supervisor.
    """
    calls = [ToolCallSpec("nap", '{"seconds": 100}', id="c1"), ToolCallSpec("nap", "{}", id="c2")]
    model = ScriptedModel([CallTools(calls), Reply("after")])
    async with runtime(model, tools=[nap]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def audit(event: Event) -> None:
            if isinstance(event.data, ToolResultEvent):
                agent.session.append_custom("x/audit", {"call": event.data.call_id})

        agent.session.observe(audit)
        await crash_while_a_tool_runs(agent, monkeypatch)
        events = agent.session.events
        check_session_invariants(events)
        call_seqs = {e.data.call_id: e.seq for e in of_type(events, "tool/call")}
        sources = {
            e.data.call_id: e.source_event_seqs
            for e in of_type(events, "tool/result")
            if isinstance(e.data, ToolResultEvent)
        }
        assert sources == {"c1": (call_seqs["c1"],), "c2": (call_seqs["c2"],)}
        assert len(of_type(events, "x/audit")) == 2


async def test_supervisor_settles_the_prompt_of_a_crashed_batch(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: an ``ask`` whose prompt was drained into a crashing batch still gets an answer.

    Breaks ``_driver._guarded_turn`` once (the crash happens after the batch
    was drained, before ``turn/start``). The asker must not wait forever: its
    result reports the failure, and the restarted driver serves the next ask.
    """
    real = _driver._guarded_turn
    crashes: list[int] = []

    async def guarded(core: _core.AgentCore, state: Any, items: Any) -> bool:
        if not crashes:
            crashes.append(1)
            raise DriverBugError("guarded_turn bug")
        return await real(core, state, items)

    monkeypatch.setattr(_driver, "_guarded_turn", guarded)
    model = ScriptedModel([Reply("fine")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        lost: retinue.TurnResult | None = None
        with trio.move_on_after(60):
            lost = await agent.ask("doomed")
        assert crashes == [1]
        assert len(errors) == 1
        assert lost is not None, "the ask of the crashed batch never resolved"
        assert lost.reason.kind == "error"
        result = await agent.ask("again")
        assert result.reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_supervisor_disposes_an_agent_that_crashes_twice_within_the_window(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: a second crash within the restart window disposes the agent, with both crashes reported.

    Breaks ``AgentCore.set_status`` for two ``running`` transitions. The agent
    leaves ``rt.agents``, ``agent/disposed`` fires, its verbs refuse, and the
    prompt that was pending when it died is settled ``disposed``.
    """
    model = ScriptedModel([Reply("never")])
    async with runtime(model, restart=retinue.RestartPolicy(window=60.0)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        disposed = record(rt, agent, "agent/disposed")
        crashes = crash_on_running(monkeypatch, times=2)
        agent.send("first")
        pending: retinue.TurnResult | None = None
        with trio.move_on_after(60):
            pending = await agent.ask("second")
        assert crashes == [1, 1]
        assert [type(args[-1]) for args in errors] == [DriverBugError, DriverBugError]
        await agent.wait_idle()
        assert agent.status == "disposed"
        assert rt.agents.get(agent.id) is None
        assert len(disposed) == 1
        with pytest.raises(retinue.AgentDisposedError):
            agent.send("hello?")
        check_session_invariants(agent.session.events)
        assert pending is not None, "the pending ask was never settled"
        assert pending.reason.kind == "disposed"


async def test_resuming_an_agent_its_supervisor_gave_up_waits_for_its_teardown(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R13.3, DESIGN 4: once the supervisor has given an agent up it reads ``disposed``; resuming
    its id at once waits for its teardown, as after ``dispose``, and resumes the log, rather than
    refusing the id as still live until the teardown has run."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, restart=retinue.RestartPolicy(window=60.0)) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        await agent.ask("before")
        given_up = trio.Event()
        rt.hooks.on("agent/status", lambda _agent, status: status == "disposed" and given_up.set())
        crashes = crash_on_running(monkeypatch, times=2)
        agent.send("boom")
        await given_up.wait()
        assert (crashes, rt.agents.get("s")) == ([1, 1], agent)
        resumed = await rt.resume_agent("s", OPTIONS)
        assert (resumed is not agent, rt.agents.get("s")) == (True, resumed)
        assert (await resumed.ask("after")).reason.kind == "completed"
        check_session_invariants(resumed.session.events)


async def test_supervisor_restarts_again_after_the_window_has_passed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: crashes further apart than the restart window are each restarted."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, restart=retinue.RestartPolicy(window=10.0)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        crashes = crash_on_running(monkeypatch, times=1)
        assert (await agent.ask("one")).reason.kind == "completed"
        await trio.sleep(30)
        monkeypatch.undo()
        crashes = crash_on_running(monkeypatch, times=1)
        assert (await agent.ask("two")).reason.kind == "completed"
        assert crashes == [1]
        assert rt.agents.get(agent.id) is agent
        assert turn_ends(agent.session.events) == ["completed", "completed"]


async def test_a_restarted_driver_composes_the_session_prefix_again(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.18, DESIGN 4: the session prefix is composed once per driver instance, a restarted one too.

    Breaks ``AgentCore.set_status`` for one ``running`` transition after the
    first turn. The restarted driver is a fresh instance: its first step runs
    the ``agent/session-prefix`` listeners again rather than reusing the
    crashed driver's prefix, as it anchors a fresh request header.
    """
    model = ScriptedModel([Reply("one"), Reply("two"), Reply("three")])
    composed: list[int] = []
    async with runtime(model) as rt:

        async def prefix(_agent: object, _seed: object, _signal: object, call_next: Next) -> Any:
            composed.append(len(composed) + 1)
            return await call_next()

        rt.hooks.on("agent/session-prefix", prefix)
        agent = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("first")).reason.kind == "completed"
        assert composed == [1]
        crashes = crash_on_running(monkeypatch, times=1)
        result = await agent.ask("second")
        assert crashes == [1]
        assert result.reason.kind == "completed"
        assert composed == [1, 2]
        assert (await agent.ask("third")).reason.kind == "completed"
        assert composed == [1, 2]


async def test_steering_left_by_a_crashed_turn_starts_the_next_turn(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R3.10, DESIGN 4: a steer still pending when the driver crashes is run, not stranded.

    Breaks the post-turn flush once: it waits, then raises, so the bug escapes
    a turn already closed. A steer sent while it waits (the agent still reads
    ``running``) sits in the steering FIFO when the driver crashes; the
    restarted driver must run it as the next turn's prompt.
    """
    real = _turn.flush
    crashes: list[int] = []

    async def broken(core: _core.AgentCore, turn: int, step: int) -> None:
        if not crashes:
            crashes.append(1)
            await trio.sleep(5)
            raise DriverBugError("flush bug")
        await real(core, turn, step)

    monkeypatch.setattr(_turn, "flush", broken)
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("first")
        await trio.sleep(1)
        flushing = agent.status
        assert flushing == "running"
        agent.steer("later")
        await trio.sleep(10)
        await agent.wait_idle()
        events = agent.session.events
        assert crashes == [1]
        assert user_texts(events) == ["first", "later"]
        assert turn_ends(events) == ["completed", "completed"]
        assert agent.status == "idle"
        check_session_invariants(events)


@pytest.mark.parametrize("where", ["turn", "post-turn-flush"])
async def test_an_ask_whose_turn_a_driver_crash_ended_returns_once_the_turn_is_flushed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """DESIGN 4, R7.49: ``ask`` returns once its turn has ended and been flushed, a turn a driver
    crash ended too: the crash does not answer the prompt at once, returning the ask while the
    closing events (or, for a crash in the post-turn flush, the whole turn) are not yet committed,
    for a crash of the process to lose them.

    Breaks ``TurnState.record_error`` (the turn's error handling), or the driver's post-turn flush
    once.
    """
    store = SlowFlushStore()
    if where == "turn":
        model = ScriptedModel([FinishWithError("boom"), Reply("fine")])

        def broken(self: _state.TurnState, error: BaseException) -> None:
            raise DriverBugError("record_error bug")

        monkeypatch.setattr(_state.TurnState, "record_error", broken)
    else:
        model = ScriptedModel([Reply("ok"), Reply("fine")])
        crash_in_the_post_turn_flush(monkeypatch)
    async with runtime(model, store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        restarts = record(rt, agent, "agent/restarted")
        result = await agent.ask("go")
        assert len(restarts) == 1
        assert result.turn == 1
        assert store.store.statistics().committed_events == len(agent.session.events)
        monkeypatch.undo()
        assert (await agent.ask("again")).reason.kind == "completed"


async def test_a_driver_crashing_once_its_agent_is_disposed_is_not_restarted(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R12.9: a driver crash during the agent's disposal is reported, never restarted.

    Breaks the post-turn flush of a disposed agent's turn. The agent is ending: the
    crash is reported on ``agent/error``, but no ``agent/restarted`` follows (nothing
    is restarted on a disposed agent), and the disposal completes with every event
    of the log committed.
    """
    real = _turn.flush
    crashes: list[int] = []

    async def broken(core: _core.AgentCore, turn: int, step: int) -> None:
        if core.disposed and not crashes:
            crashes.append(1)
            raise DriverBugError("flush bug")
        await real(core, turn, step)

    monkeypatch.setattr(_turn, "flush", broken)
    store = MemoryStore()
    async with runtime(ScriptedModel([Hang()]), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        restarts = record(rt, agent, "agent/restarted")
        agent.send("go")
        await trio.sleep(1)
        with trio.fail_after(60):
            await agent.dispose()
        assert crashes == [1]
        assert [type(args[-1]) for args in errors] == [DriverBugError]
        assert restarts == []
        assert rt.agents.get(agent.id) is None
        assert turn_ends(agent.session.events) == ["disposed"]
        assert store.statistics().committed_events == len(agent.session.events)


async def test_an_agent_with_nothing_queued_is_idle_during_a_restart_pause(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R2.31: a crash that leaves nothing queued leaves the agent ``idle`` for the pause.

    Breaks the post-turn flush twice, so the second crash (a closed turn,
    nothing queued) waits out a back-off pause before its restart. The
    agent has no work: it reads ``idle`` and ``wait_idle`` returns at once,
    not when the pause ends.
    """
    real = _turn.flush
    crashes: list[int] = []

    async def broken(core: _core.AgentCore, turn: int, step: int) -> None:
        if len(crashes) < 2:
            crashes.append(1)
            raise DriverBugError(f"flush bug #{len(crashes)}")
        await real(core, turn, step)

    monkeypatch.setattr(_turn, "flush", broken)
    policy = retinue.RestartPolicy(max_restarts=5, backoff=20)
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, restart=policy) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        restarts = record(rt, agent, "agent/restarted")
        await agent.ask("one")
        await agent.ask("two")
        await trio.sleep(1)
        assert crashes == [1, 1]
        assert len(restarts) == 1, "the second restart is heard once its pause is over"
        assert agent.status == "idle"
        start = trio.current_time()
        await agent.wait_idle()
        assert trio.current_time() - start < 1
        assert (await agent.ask("three")).reason.kind == "completed"
        assert len(restarts) == 2
        assert turn_ends(agent.session.events) == ["completed", "completed", "completed"]
