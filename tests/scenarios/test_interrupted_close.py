"""Ctrl-C raised again while an interrupted turn is closed: the close still balances the log,
answers every call and flushes, and the Ctrl-C still reaches the caller (R9.25, R12.10)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import pytest
import trio
import trio.testing

import retinue
from retinue.loop import _core, _state, _turn
from retinue.session import Event, Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from retinue.tools import ToolRegistry
from tests.helpers import DEADLINE, OPTIONS, last_end_reason, nap
from tests.scenarios._supervisor_kit import DriverBugError, record

Drive = Callable[[retinue.Runtime, retinue.Agent], Awaitable[None]]


def _interrupt(*_args: object) -> NoReturn:
    raise KeyboardInterrupt


def _two_calls(first: int, second: int, *, repeat: bool = False) -> ScriptedModel:
    """A model asking for two ``nap`` calls at once (*first* and *second* seconds), then
    answering."""
    calls = [ToolCallSpec("nap", f'{{"seconds": {first}}}')]
    calls.append(ToolCallSpec("nap", f'{{"seconds": {second}}}'))
    return ScriptedModel([CallTools(calls), Reply("ok" if repeat else "never")], repeat_last=repeat)


async def _run(
    model: ScriptedModel,
    drive: Drive,
    *,
    store: MemoryStore | None = None,
    cut_at: float | None = None,
) -> tuple[Session, BaseException | None]:
    """Run *drive* with a fresh agent of a runtime of *model* (``nap`` its tool), under the
    test's deadline or, given *cut_at*, a deadline around the runtime cutting it then;
    returns the agent's session and what the runtime raised (judged by the caller: a group
    would end the test run)."""
    sessions: list[Session] = []
    try:
        cut = DEADLINE * 2 if cut_at is None else cut_at
        with trio.fail_after(DEADLINE), trio.move_on_after(cut):
            async with retinue.open_runtime(models=model, tools=[nap], store=store) as rt:
                agent = await rt.create_agent("a", OPTIONS)
                sessions.append(agent.session)
                await drive(rt, agent)
    except BaseException as exc:
        return sessions[0], exc
    return sessions[0], None


def _check_closed(session: Session, raised: BaseException | None) -> list[Event]:
    """Check Ctrl-C reached the caller and the log is balanced; the log's events."""
    assert isinstance(raised, KeyboardInterrupt), f"got {raised!r}"
    events = session.events
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    return list(events)


async def _ask_from_outside(
    model: ScriptedModel, prepare: Drive, *, cut_at: float | None = None
) -> tuple[Session, BaseException | None, list[str]]:
    """Ask a fresh agent "go" from a task outside the runtime, once *prepare* is called (in
    the runtime, a deadline at *cut_at* around it), then let *prepare* run on; returns the
    session, what the runtime raised and the answers' end reasons. The asker outlives the
    runtime's own cancel: unanswered, it waits until the test's deadline."""
    answers: list[str] = []
    sessions: list[Session] = []
    raised: BaseException | None = None

    async def ask(agent: retinue.Agent) -> None:
        answers.append((await agent.ask("go")).reason.kind)

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as outside:
            try:
                with trio.move_on_after(DEADLINE * 2 if cut_at is None else cut_at):
                    async with retinue.open_runtime(models=model, tools=[nap]) as rt:
                        agent = await rt.create_agent("a", OPTIONS)
                        sessions.append(agent.session)
                        outside.start_soon(ask, agent)
                        await prepare(rt, agent)
                        await trio.sleep(DEADLINE)
            except BaseException as exc:  # a group would end the test run: judged by the caller
                raised = exc
    return sessions[0], raised, answers


async def _ask_with_results_interrupted(store: MemoryStore) -> tuple[Session, BaseException | None]:
    """Ask an agent calling two tools at once, each ``tools/result`` raising Ctrl-C; returns
    its session and what the runtime raised."""

    async def drive(rt: retinue.Runtime, agent: retinue.Agent) -> None:
        rt.hooks.on("tools/result", _interrupt, agent=agent)
        await agent.ask("go")

    return await _run(_two_calls(1, 2), drive, store=store)


async def test_a_tools_result_listener_raising_ctrl_c_on_every_call_leaves_the_turn_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.25, R7.44, R12.10: the first result's listener raises Ctrl-C and so does each one the
    close tells; the turn still ends disposed with a result for every call, logged and stored,
    and the Ctrl-C reaches the caller as itself."""
    async with MemoryStore() as store:
        session, raised = await _ask_with_results_interrupted(store)
        assert isinstance(raised, KeyboardInterrupt), f"got {raised!r}"
        events = session.events
        assert [event.type for event in events[-2:]] == ["step/end", "turn/end"]
        assert last_end_reason(events).kind == "disposed"
        check_session_invariants(events)
        check_no_dangling_tool_calls(events)
        stored = await store.load(session.id)
        assert stored is not None
        assert [event.type for event in stored.events][-1] == "turn/end"


async def test_ctrl_c_from_the_result_a_cancel_left_unshown_is_raised_once_the_turn_is_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.22, R9.20, R12.10: a cancel ends the step while the first call runs and the second
    has finished; telling the ``tools/result`` listener of that result at the close raises
    Ctrl-C. The turn still ends aborted, both calls answered, and then Ctrl-C reaches the
    caller."""

    async def drive(rt: retinue.Runtime, agent: retinue.Agent) -> None:
        rt.hooks.on("tools/result", _interrupt, agent=agent)
        agent.send("go")
        await trio.sleep(1.5)
        agent.cancel("enough")
        await agent.wait_idle()

    events = _check_closed(*await _run(_two_calls(2, 1), drive))
    assert [event.type for event in events[-2:]] == ["step/end", "turn/end"]
    assert last_end_reason(events).kind == "aborted"


async def test_an_observer_raising_ctrl_c_on_every_tool_call_leaves_each_logged_call_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.8, R9.21, R9.25: the observer raises once the first ``tool/call`` is logged, and again
    on the one the close logs for the call never started; that call still gets its result, the
    turn ends balanced, and the Ctrl-C reaches the caller."""

    def interrupt_on_calls(event: Event) -> None:
        if event.type == "tool/call":
            raise KeyboardInterrupt

    async def drive(_rt: retinue.Runtime, agent: retinue.Agent) -> None:
        agent.session.observe(interrupt_on_calls)
        await agent.ask("go")

    events = _check_closed(*await _run(_two_calls(1, 2), drive))
    assert [event.type for event in events].count("tool/result") == 2
    assert [event.type for event in events[-2:]] == ["step/end", "turn/end"]


async def test_ctrl_c_held_by_the_close_reaches_the_caller_when_the_driver_then_crashes(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.10, DESIGN 4: the close holds a ``tools/result`` listener's Ctrl-C, then a bug
    crashes the driver in the turn's flush; the crash is reported and recovered, and the
    Ctrl-C still reaches the caller, where the restart let it go."""
    real_flush = _turn.flush
    crashes: list[int] = []

    async def crashing_flush(core: _core.AgentCore, turn: int, step: int) -> None:
        if not crashes:
            crashes.append(turn)
            raise DriverBugError("flush bug")
        await real_flush(core, turn, step)

    heard: list[list[tuple[Any, ...]]] = []

    async def drive(rt: retinue.Runtime, agent: retinue.Agent) -> None:
        heard.append(record(rt, agent, "agent/error"))
        rt.hooks.on("tools/result", _interrupt, agent=agent)
        agent.send("go")
        await trio.sleep(1.5)
        monkeypatch.setattr(_turn, "flush", crashing_flush)
        agent.cancel("enough")
        await agent.wait_idle()
        await trio.sleep(DEADLINE / 2)

    _check_closed(*await _run(_two_calls(2, 1, repeat=True), drive))
    assert crashes == [1]
    reported = [arg for args in heard[0] for arg in args if isinstance(arg, BaseException)]
    assert [type(error) for error in reported] == [DriverBugError], "no crash reported"


@pytest.mark.parametrize("broken", ["finish_at_once", "_dangling_text"])
async def test_a_bug_answering_a_call_at_the_close_leaves_every_call_answered(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    """R9.25, DESIGN 4: retinue's own code failing as the close answers a call (telling the
    result a cancel left unshown, or wording a synthetic one) leaves no call unanswered: the
    result is given as not shown, or the crash's close answers it; the next turn completes."""
    owner = ToolRegistry if broken == "finish_at_once" else _state.TurnState
    real = getattr(owner, broken)
    armed = [False]

    def failing(*args: Any, **kwargs: Any) -> Any:
        if armed[0]:
            raise DriverBugError(f"bug in {broken}")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, broken, failing)

    async def drive(_rt: retinue.Runtime, agent: retinue.Agent) -> None:
        agent.send("go")
        await trio.sleep(1.5)
        armed[0] = True
        agent.cancel("enough")
        await agent.wait_idle()
        armed[0] = False
        check_no_dangling_tool_calls(agent.session.events)
        check_session_invariants(agent.session.events)
        assert (await agent.ask("next")).reason.kind == "completed"

    _session, raised = await _run(_two_calls(2, 1, repeat=True), drive)
    assert raised is None, f"got {raised!r}"


async def test_ctrl_c_from_a_step_end_observer_under_a_cancel_from_outside_closes_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.22, R12.10: a deadline around the runtime cancels a turn mid-tool and an observer
    raises Ctrl-C on the ``step/end`` the close logs; the turn is still closed in the log
    (nothing else closes it once the driver unwinds) and the Ctrl-C reaches the caller."""

    def interrupt_on_step_end(event: Event) -> None:
        if event.type == "step/end":
            raise KeyboardInterrupt

    async def drive(_rt: retinue.Runtime, agent: retinue.Agent) -> None:
        agent.session.observe(interrupt_on_step_end)
        await agent.ask("go")

    model = ScriptedModel([CallTools([ToolCallSpec("nap", '{"seconds": 5}')]), Reply("never")])
    events = _check_closed(*await _run(model, drive, cut_at=2))
    assert [event.type for event in events[-2:]] == ["step/end", "turn/end"]


async def test_ctrl_c_held_by_a_close_a_deadline_began_reaches_the_caller_past_a_bug(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.10, DESIGN 4: a deadline around the runtime cancels a step of three calls; as the
    close answers them a ``tools/result`` listener raises Ctrl-C, then retinue's own code
    fails answering the third. The crash's close answers every call and the Ctrl-C, not the
    cancel a crash's recovery lets go, reaches the caller."""
    real = _state.TurnState._dangling_text
    armed, answered = [False], [0]

    def failing_on_the_second(*args: Any, **kwargs: Any) -> Any:
        answered[0] += armed[0]
        if answered[0] == 2:
            raise DriverBugError("bug answering a call")
        return real(*args, **kwargs)

    def interrupt_when_armed(*_args: object) -> None:
        if armed[0]:
            raise KeyboardInterrupt

    monkeypatch.setattr(_state.TurnState, "_dangling_text", failing_on_the_second)
    calls = [ToolCallSpec("nap", f'{{"seconds": {each}}}') for each in (3, 1, 3)]

    async def drive(rt: retinue.Runtime, agent: retinue.Agent) -> None:
        rt.hooks.on("tools/result", interrupt_when_armed, agent=agent)
        agent.send("go")
        await trio.sleep(1.4)
        armed[0] = True
        await trio.sleep(DEADLINE)

    model = ScriptedModel([CallTools(calls), Reply("ok")])
    _check_closed(*await _run(model, drive, cut_at=1.5))
    assert answered[0] >= 2, "the bug was never reached"


async def test_ctrl_c_from_a_turn_end_observer_lets_the_asker_hear_how_the_turn_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.44, R12.10: an observer raises Ctrl-C on the ``turn/end`` the turn logs; the turn is
    flushed and its asker answered with the logged end (``completed``), not ``disposed``,
    and then the Ctrl-C reaches the caller."""

    def interrupt_on_turn_end(event: Event) -> None:
        if event.type == "turn/end":
            raise KeyboardInterrupt

    async def prepare(_rt: retinue.Runtime, agent: retinue.Agent) -> None:
        agent.session.observe(interrupt_on_turn_end)

    session, raised, answers = await _ask_from_outside(ScriptedModel([Reply("ok")]), prepare)
    events = _check_closed(session, raised)
    assert last_end_reason(events).kind == "completed"
    assert answers == ["completed"]


async def test_a_bug_in_the_shielded_flush_of_a_close_a_deadline_began_is_reported(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.49, R12.10, DESIGN 4: a deadline around the runtime cancels a turn whose close holds
    a ``tools/result`` listener's Ctrl-C, and the close's shielded flush fails with a bug: the
    bug is reported on ``agent/error`` and the Ctrl-C still reaches the caller."""
    real_flush = _turn.flush_shielded
    failed: list[int] = []

    async def failing_flush(core: _core.AgentCore, turn: int, step: int) -> None:
        if not failed:
            failed.append(turn)
            raise DriverBugError("shielded flush bug")
        await real_flush(core, turn, step)

    monkeypatch.setattr(_turn, "flush_shielded", failing_flush)
    heard: list[list[tuple[Any, ...]]] = []

    async def drive(rt: retinue.Runtime, agent: retinue.Agent) -> None:
        heard.append(record(rt, agent, "agent/error"))
        rt.hooks.on("tools/result", _interrupt, agent=agent)
        await agent.ask("go")

    _check_closed(*await _run(_two_calls(2, 1), drive, cut_at=1.5))
    assert failed == [1]
    reported = [arg for args in heard[0] for arg in args if isinstance(arg, BaseException)]
    assert [type(error) for error in reported] == [DriverBugError], "no bug reported"


async def test_a_crash_whose_flush_a_listener_interrupts_still_answers_its_asker(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.49, R12.10, DESIGN 4: a deadline around the runtime cancels a turn, a bug crashes
    the driver in its close, and a ``session/flush`` listener raises Ctrl-C during the
    crash's flush: the asker is still answered, and the Ctrl-C reaches the caller."""
    real = _state.TurnState._dangling_text
    armed = [False]

    def failing(*args: Any, **kwargs: Any) -> Any:
        if armed[0]:
            raise DriverBugError("bug wording a synthetic result")
        return real(*args, **kwargs)

    def interrupt_when_armed(*_args: object) -> None:
        if armed[0]:
            raise KeyboardInterrupt

    async def prepare(rt: retinue.Runtime, agent: retinue.Agent) -> None:
        rt.hooks.on("session/flush", interrupt_when_armed, agent=agent)
        await trio.sleep(1.4)
        armed[0] = True

    monkeypatch.setattr(_state.TurnState, "_dangling_text", failing)
    model = ScriptedModel([CallTools([ToolCallSpec("nap", '{"seconds": 3}')]), Reply("never")])
    session, raised, answers = await _ask_from_outside(model, prepare, cut_at=1.5)
    assert isinstance(raised, KeyboardInterrupt), f"got {raised!r}"
    assert len(answers) == 1
    check_session_invariants(session.events)
