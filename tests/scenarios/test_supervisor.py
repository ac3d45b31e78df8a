"""Driver supervision, runtime shutdown and many agents at once (DESIGN 4; SPEC R7.48, R12.9, R12.10).

A driver crash is a bug in retinue itself: every turn-level failure is
contained by the driver (R7.44-R7.48), so no public input can make a driver
crash. The crash tests therefore monkeypatch a private driver function to
raise; that is the only honest way to inject such a bug, and each test says
which function it breaks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, StoreError
from retinue.actors import Subscription
from retinue.loop import _core, _driver, _state, _turn
from retinue.session import Event, RequestHeader, Session, ToolResultEvent, TurnEnd
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    FinishWithError,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.helpers import OPTIONS, Next, nap, of_type, runtime, texts, turn_ends, user_texts


@retinue.tool
async def tally(n: int) -> str:
    """Count, exclusively.

    Args:
        n: A number.
    """
    await trio.lowlevel.checkpoint()
    return str(n + 1)


class DriverBugError(RuntimeError):
    """The simulated bug."""


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


def record(rt: retinue.Runtime, agent: retinue.Agent, name: str) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    rt.hooks.on(name, lambda _agent, *args: seen.append(args), agent=agent)  # type: ignore[call-overload]
    return seen


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

    async def guarded(core: _core.AgentCore, items: Any) -> bool:
        if not crashes:
            crashes.append(1)
            raise DriverBugError("guarded_turn bug")
        return await real(core, items)

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
    """R13.3, DESIGN 4: once the supervisor has given an agent up it reads ``disposed``;
    resuming its id at once waits for its teardown, as after ``dispose``, and resumes the
    log. Before, the id was refused as still live until the teardown had run."""
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


class FlusherBugError(RuntimeError):
    """The simulated bug in an agent's flusher."""


def crash_flusher(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make the flusher's ``flush`` raise *times* times (a bug, not a store failure)."""
    real = _turn.flush  # what _driver imported
    crashes: list[int] = []

    async def flush(core: _core.AgentCore, turn: int, step: int) -> None:
        if len(crashes) < times:
            crashes.append(1)
            raise FlusherBugError(f"flusher bug #{len(crashes)}")
        await real(core, turn, step)

    monkeypatch.setattr(_driver, "flush", flush)
    return crashes


async def test_supervisor_restarts_a_crashed_flusher_and_the_runtime_runs_on(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R2.21: a bug in an agent's flusher is that agent's crash, never the runtime's.

    An idle injection makes the flusher flush; its crash is reported on
    ``agent/error``, the flusher restarted (``agent/restarted``), and both the
    agent and a healthy neighbour keep working; the next idle flush runs.
    """
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        other = await rt.create_agent("other", OPTIONS)
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        restarts = record(rt, agent, "agent/restarted")
        crashes = crash_flusher(monkeypatch, times=1)
        agent.inject("context")
        await agent.wait_idle()
        await trio.sleep(1)
        assert crashes == [1]
        assert [type(args[-1]) for args in errors] == [FlusherBugError]
        assert [type(args[-1]) for args in restarts] == [FlusherBugError]
        assert rt.agents.get(agent.id) is agent
        assert (await other.ask("still there?")).reason.kind == "completed"
        assert (await agent.ask("and you?")).reason.kind == "completed"
        flushes = record(rt, agent, "session/flush")
        agent.inject("more context")
        await agent.wait_idle()
        assert len(flushes) == 1, "the restarted flusher serves the next idle injection"
        assert len(errors) == 1


async def test_wait_idle_in_a_flusher_restart_pause_waits_for_the_owed_flush(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2.21, R7.2: ``wait_idle`` after an idle injection returns once that injection is
    flushed, also while the flusher waits out a restart pause: the restarted flusher
    flushes it. It returned at once, before the flush, finding the crashed flusher's
    rounds ended."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    policy = retinue.RestartPolicy(max_restarts=5, backoff=10, max_backoff=10)
    async with runtime(model, restart=policy) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        crashes = crash_flusher(monkeypatch, times=2)
        flushes = record(rt, agent, "session/flush")
        agent.inject("first")
        await agent.wait_idle()  # its flush crashed: reported, and counted as done
        agent.inject("second")
        await trio.sleep(1)  # its flush crashed too: the restart waits 10s
        assert crashes == [1, 1]
        agent.inject("third")
        await agent.wait_idle()
        assert len(flushes) == 1
        assert trio.current_time() == pytest.approx(10.0)


async def test_wait_idle_in_a_flusher_restart_pause_returns_when_the_agent_is_given_up(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2.21, R12.9: disposed during the flusher's restart pause, the agent is not flushed
    by that flusher again: a ``wait_idle`` waiting for its owed flush returns with the
    teardown, which makes it durable."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    policy = retinue.RestartPolicy(max_restarts=5, backoff=10, max_backoff=10)
    async with runtime(model, restart=policy) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        crash_flusher(monkeypatch, times=2)
        agent.inject("first")
        await agent.wait_idle()
        agent.inject("second")
        await trio.sleep(1)
        agent.inject("third")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)
            await agent.dispose()
        assert trio.current_time() < 10
        assert agent.status == "disposed"


async def test_wait_idle_in_a_flusher_restart_pause_returns_when_the_runtime_is_cancelled(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R2.21, R12.9, R12.10: cancelled with its runtime while its flusher waits out a
    restart pause, the agent's flusher never runs again: a ``wait_idle`` (in a task
    outside the runtime) waiting for the flush it owed returns with the teardown,
    whose final flush stores the injection. It waited forever, on a round no
    flusher would serve."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    policy = retinue.RestartPolicy(max_restarts=5, backoff=100, max_backoff=100)
    store = MemoryStore()
    returned: list[float] = []
    with trio.fail_after(60):
        async with store, trio.open_nursery() as outside:
            with trio.CancelScope() as scope:
                async with retinue.open_runtime(models=model, store=store, restart=policy) as rt:
                    agent = await rt.create_agent("a", OPTIONS)
                    crashes = crash_flusher(monkeypatch, times=2)
                    agent.inject("first")
                    await agent.wait_idle()
                    agent.inject("second")
                    await trio.sleep(1)  # its flush crashed too: the restart waits 100s
                    assert crashes == [1, 1]
                    agent.inject("third")

                    async def wait_idle() -> None:
                        await agent.wait_idle()
                        returned.append(trio.current_time())

                    outside.start_soon(wait_idle)
                    await trio.sleep(1)
                    assert returned == []
                    scope.cancel()
                    await trio.sleep_forever()
            assert scope.cancelled_caught
            assert returned == [pytest.approx(2.0)]
            assert agent.status == "disposed"
            stored = await store.inspect(agent.id)
            injected = of_type(stored.events, "context/message")
            assert [texts(e.data.content) for e in injected] == ["first", "second", "third"]  # type: ignore[union-attr]
    assert f"restarting a task of agent {agent.id} in 100s" in caplog.messages
    assert [r.message for r in caplog.records if r.levelname == "ERROR"] == [
        f"flusher of agent {agent.id} crashed"
    ] * 2


async def test_supervisor_disposes_an_agent_whose_flusher_crashes_past_its_policy(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: a flusher crash counts under the same policy as a driver crash; past
    ``max_restarts`` the agent alone is disposed, with the crash reported, and the
    runtime and its other agents run on.
    """
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, restart=retinue.RestartPolicy(max_restarts=0)) as rt:
        other = await rt.create_agent("other", OPTIONS)
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        restarts = record(rt, agent, "agent/restarted")
        disposed = record(rt, agent, "agent/disposed")
        crash_flusher(monkeypatch, times=1)
        agent.inject("context")
        await agent.wait_idle()
        assert [type(args[-1]) for args in errors] == [FlusherBugError]
        assert restarts == []
        assert agent.status == "disposed"
        assert rt.agents.get(agent.id) is None
        assert len(disposed) == 1
        assert (await other.ask("still there?")).reason.kind == "completed"


async def test_runtime_shutdown_disposes_every_agent_and_flushes_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10, R12.9, R2.36: leaving ``open_runtime`` disposes each agent; open turns end ``disposed`` and are flushed."""
    model = ScriptedModel(
        {
            "hang": [Hang("thinking")],
            "tools": [CallTools([ToolCallSpec("nap", '{"seconds": 1000}', id="t1")])],
            "idle": [Reply("hi")],
        }
    )
    flushed: dict[str, int] = {}
    disposed: list[str] = []

    def on_flush(_agent: retinue.Agent, session: retinue.Session) -> None:
        flushed[session.id] = len(session.events)

    async with runtime(model, tools=[nap]) as rt:
        rt.hooks.on("session/flush", on_flush)
        rt.hooks.on("agent/disposed", lambda agent: disposed.append(agent.id))
        streaming = await rt.create_agent("s", AgentOptions(model="hang"))
        tooling = await rt.create_agent("t", AgentOptions(model="tools"))
        idle = await rt.create_agent("i", AgentOptions(model="idle"))
        assert (await idle.ask("hello")).reason.kind == "completed"
        streaming.send("go")
        tooling.send("go")
        await trio.sleep(5)
        assert streaming.status == tooling.status == "running"
        agents = [streaming, tooling, idle]
    assert sorted(disposed) == sorted(a.id for a in agents)
    assert len(rt.agents) == 0
    for agent in agents:
        events = agent.session.events
        assert agent.status == "disposed"
        check_session_invariants(events)
        assert flushed[agent.id] == len(events), f"{agent.id}: closing events not flushed"
    assert turn_ends(streaming.session.events) == ["disposed"]
    assert turn_ends(tooling.session.events) == ["disposed"]
    (answer,) = [e.data for e in of_type(tooling.session.events, "tool/result")]
    assert isinstance(answer, ToolResultEvent)
    assert answer.error is not None
    assert answer.error.code == "ABORTED"
    assert turn_ends(idle.session.events) == ["completed"]


@pytest.mark.parametrize("how", ["create", "resume"])
async def test_runtime_shutdown_aborts_a_creation_still_in_its_setup(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """R12.10: ``aclose`` aborts creations in flight ("agent loop is not active") and awaits them.

    The setup's scoped listener is unwound, nothing is published, and no
    agent runs after shutdown.
    """
    heard: list[str] = []
    outcomes: list[object] = []
    model = ScriptedModel([Reply("hi")], repeat_last=True)
    async with runtime(model) as rt:
        stored = await rt.create_agent("stored", OPTIONS)
        await stored.ask("hello")
        await stored.dispose()

        async def slow_setup(agent: retinue.Agent) -> None:
            rt.hooks.on("agent/status", lambda _a, status: heard.append(status), agent=agent)
            await trio.sleep(10)

        async def create() -> None:
            try:
                if how == "create":
                    outcomes.append(await rt.create_agent("late", OPTIONS, setup=slow_setup))
                else:
                    outcomes.append(await rt.resume_agent(stored.id, OPTIONS, setup=slow_setup))
            except RuntimeError as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create)
            await trio.sleep(1)
            await rt.aclose()
            assert len(outcomes) == 1, "aclose returned before the creation unwound"
        (outcome,) = outcomes
        assert isinstance(outcome, RuntimeError)
        assert "agent loop is not active" in str(outcome)
        assert len(rt.agents) == 0
        assert not rt.hooks.has_listeners("agent/status")
        assert heard == []


async def test_runtime_runs_two_hundred_agents_with_tool_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.13-R4.16, R9.17, R9.25: 200 agents x 3 turns of mixed parallel/exclusive tool calls all complete soundly."""
    model = ScriptedModel.tool_loop(
        ["nap", "tally", "nap", "nap"],
        calls_per_step=4,
        answer_chunks=3,
        arguments={"nap": '{"seconds": 1}', "tally": '{"n": 2}'},
        delay=0.5,
    )
    async with runtime(model, tools=[nap, tally], max_parallel_tool_calls=2) as rt:
        agents = [await rt.create_agent(f"a{i}", OPTIONS) for i in range(200)]
        outcomes: dict[str, list[retinue.TurnResult]] = {agent.id: [] for agent in agents}

        async def converse(agent: retinue.Agent) -> None:
            for turn in range(3):
                outcomes[agent.id].append(await agent.ask(f"question {turn}"))

        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(converse, agent)
        for agent in agents:
            assert [r.reason.kind for r in outcomes[agent.id]] == ["completed"] * 3
            assert [r.turn for r in outcomes[agent.id]] == [1, 2, 3]
            events = agent.session.events
            check_session_invariants(events)
            check_no_dangling_tool_calls(events)
            assert len(of_type(events, "tool/result")) == 12
            calls = [json.loads(e.data.arguments) for e in of_type(events, "tool/call")]  # type: ignore[union-attr]
            assert len(calls) == 12
            assert agent.status == "idle"
        assert len(rt.agents) == 200
        assert model.statistics().calls == 200 * 3 * 2


class _RefusingStore(DelegatingStore):
    """A memory store that refuses every new session when the runtime publishes it."""

    def attach_new(self, session: Session) -> None:
        raise StoreError(f"session {session.id!r} cannot be stored", code="STORAGE_ERROR")


@pytest.mark.timeout(30)  # the old failure hung inside a shield, out of the clock's reach
async def test_dispose_of_an_agent_whose_setup_failed_returns_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R12.9: a handle whose creation failed was never started: disposing it ends at
    once, and so does a subscription opened in its setup.
    """
    kept: list[retinue.Agent] = []
    subscriptions: list[Subscription] = []

    def failing_setup(agent: retinue.Agent) -> None:
        kept.append(agent)
        subscriptions.append(agent.subscribe())
        raise ValueError("setup failed")

    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(ValueError, match="setup failed"):
            await rt.create_agent("a", OPTIONS, setup=failing_setup)
        await kept[0].dispose()
        assert kept[0].status == "disposed"
        assert len(rt.agents) == 0
        with trio.move_on_after(60) as waited:
            async with subscriptions[0] as events:
                assert [event async for event in events] == []
        assert not waited.cancelled_caught, "the torn-down agent's subscription never ended"


@pytest.mark.timeout(30)  # the old failure hung inside a shield, out of the clock's reach
async def test_agent_disposed_during_its_setup_is_never_published(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.5, R12.8: disposing an agent in its own setup returns; the creation then refuses
    to publish it (``AgentDisposedError``) and unwinds what the setup registered.
    """
    heard: list[str] = []

    async def setup(agent: retinue.Agent) -> None:
        rt.hooks.on("agent/status", lambda _a, status: heard.append(status), agent=agent)
        await agent.dispose()

    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(retinue.AgentDisposedError, match="disposed during its setup"):
            await rt.create_agent("b", OPTIONS, setup=setup)
        assert len(rt.agents) == 0
        assert not rt.hooks.has_listeners("agent/status")
    assert heard == []  # R12.6: an unload during setup publishes nothing


@pytest.mark.parametrize("agent_id", ["..", "x" * 600, "a/b", ""])
async def test_create_agent_refuses_an_id_no_store_can_hold_before_its_setup(
    autojump_clock: trio.testing.MockClock, agent_id: str
) -> None:
    """R12.5, R11.12: an id the store would refuse is refused up front; setup never runs."""
    ran: list[retinue.Agent] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(retinue.SessionError) as refused:
            await rt.create_agent("c", OPTIONS, session_id=agent_id, setup=ran.append)
        assert refused.value.code == "INVALID_SESSION_ID"
        assert ran == []


@pytest.mark.parametrize("how", ["create", "resume", "fork", "fork-source"])
@pytest.mark.parametrize(
    ("agent_id", "problem"),
    [
        (["s"], "is not a string"),
        (7, "is not a string"),
        ("", "is empty"),
        ("a/b", "contains a path separator"),
    ],
    ids=["unhashable", "int", "empty", "path-separator"],
)
async def test_every_way_to_start_an_agent_refuses_an_id_no_store_can_hold_alike(
    autojump_clock: trio.testing.MockClock, how: str, agent_id: object, problem: str
) -> None:
    """R12.1, R11.12: ``create_agent``, ``resume_agent`` and ``fork_agent_session`` (the
    fork's id and its source's) refuse an id the store would refuse with
    ``SessionError(INVALID_SESSION_ID)`` naming the id, before anything runs. An
    unhashable one raised a bare ``TypeError`` (the id was looked up first), and a fork
    made a session no agent could start on.
    """
    ran: list[retinue.Agent] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        await rt.create_agent("source", OPTIONS, session_id="source")

        async def start() -> object:
            if how == "create":
                return await rt.create_agent("c", OPTIONS, session_id=agent_id, setup=ran.append)  # type: ignore[arg-type]
            if how == "resume":
                return await rt.resume_agent(agent_id, OPTIONS, setup=ran.append)  # type: ignore[arg-type]
            if how == "fork-source":
                return rt.fork_agent_session(agent_id, "child")  # type: ignore[arg-type]
            return rt.fork_agent_session("source", agent_id)  # type: ignore[arg-type]

        with pytest.raises(retinue.SessionError) as refused:
            await start()
        assert refused.value.code == "INVALID_SESSION_ID"
        assert refused.value.message == f"session id {agent_id!r} {problem}"
        assert ran == []
        assert [agent.id for agent in rt.agents] == ["source"]


@pytest.mark.parametrize(
    ("name", "session_id", "problem"),
    [
        ("", None, "name must be a non-empty str labelling the agent, got ''"),
        ("", "s-1", "name must be a non-empty str labelling the agent, got ''"),
        (None, None, "name must be a non-empty str labelling the agent, got None"),
        ("a/b", None, "name 'a/b' cannot label a session: session id 'a/b-session-"),
    ],
    ids=["empty", "empty-beside-session-id", "None", "path-separator"],
)
async def test_create_agent_refuses_a_name_that_cannot_label_the_agent_naming_the_argument(
    autojump_clock: trio.testing.MockClock, name: object, session_id: str | None, problem: str
) -> None:
    """R13.1, R13.3: the name labels the agent and begins its fresh id
    ``<name>-session-<uuid4>``; like a configured agent's label it is a non-empty str, and
    a name that cannot label one is refused before the setup runs, naming ``name``."""
    ran: list[retinue.Agent] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(retinue.SessionError) as refused:
            await rt.create_agent(name, OPTIONS, session_id=session_id, setup=ran.append)  # type: ignore[arg-type]
        assert refused.value.code == "INVALID_SESSION_ID"
        assert refused.value.message.startswith(problem)
        assert ran == []
        assert len(rt.agents) == 0


async def test_failed_publication_unwinds_the_setup(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.5, R12.6: when the store refuses the new session, the setup's registrations go."""

    def setup(agent: retinue.Agent) -> None:
        rt.hooks.on("agent/status", lambda _a, _status: None, agent=agent)

    store = _RefusingStore(MemoryStore())
    async with runtime(ScriptedModel([Reply("hi")]), store=store) as rt:
        with pytest.raises(StoreError, match="cannot be stored"):
            await rt.create_agent("d", OPTIONS, setup=setup)
        assert len(rt.agents) == 0
        assert not rt.hooks.has_listeners("agent/status")


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


async def test_a_flusher_crashing_once_its_agent_is_disposed_is_not_restarted(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R12.9: a flusher crash during the agent's disposal is reported, never restarted.

    An idle injection owes a flush; the agent is disposed before the flusher
    runs it, and that flush crashes. The agent is ending: the crash is
    reported on ``agent/error``, no ``agent/restarted`` follows, and the
    disposal completes.
    """
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        restarts = record(rt, agent, "agent/restarted")
        crashes = crash_flusher(monkeypatch, times=1)
        agent.inject("context")
        with trio.fail_after(60):
            await agent.dispose()
        assert crashes == [1]
        assert [type(args[-1]) for args in errors] == [FlusherBugError]
        assert restarts == []
        assert agent.status == "disposed"
        assert rt.agents.get(agent.id) is None


class _SlowFlushStore(DelegatingStore):
    """A memory store whose flush takes virtual seconds, as a real commit takes time."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())

    async def flush(self, session: Session) -> None:
        await trio.sleep(5)
        await self.store.flush(session)


@pytest.mark.parametrize("where", ["turn", "post-turn-flush"])
async def test_an_ask_whose_turn_a_driver_crash_ended_returns_once_the_turn_is_flushed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """DESIGN 4, R7.49: ``ask`` returns once its turn has ended and been flushed, a turn
    a driver crash ended too. The crash answered the prompt at once, and the ask
    returned while the closing events (or, for a crash in the post-turn flush, the
    whole turn) were not yet committed: a crash of the process then lost them.

    Breaks ``TurnState.record_error`` (the turn's error handling), or the driver's
    post-turn flush once.
    """
    store = _SlowFlushStore()
    if where == "turn":
        model = ScriptedModel([FinishWithError("boom"), Reply("fine")])

        def broken(self: _state.TurnState, error: BaseException) -> None:
            raise DriverBugError("record_error bug")

        monkeypatch.setattr(_state.TurnState, "record_error", broken)
    else:
        model = ScriptedModel([Reply("ok"), Reply("fine")])
        real = _turn.flush
        crashes: list[int] = []

        async def broken_flush(core: _core.AgentCore, turn: int, step: int) -> None:
            if not crashes:
                crashes.append(1)
                raise DriverBugError("flush bug")
            await real(core, turn, step)

        monkeypatch.setattr(_turn, "flush", broken_flush)
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
        assert len(restarts) == 2
        assert agent.status == "idle"
        start = trio.current_time()
        await agent.wait_idle()
        assert trio.current_time() - start < 1
        assert (await agent.ask("three")).reason.kind == "completed"
        assert turn_ends(agent.session.events) == ["completed", "completed", "completed"]
