"""Ctrl-C and a driver crash together: the crash is handled, and Ctrl-C still ends the
runtime (DESIGN 4; SPEC R7.44, R12.10).

A driver crash is a bug in retinue itself, so these tests monkeypatch a private
function of the turn's own bookkeeping to raise, and say which one.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn

import pytest
import trio
import trio.testing

import retinue
from retinue._errors import is_interrupt
from retinue.loop import AgentCore, _driver, _state, _turn
from retinue.loop._core import settle
from retinue.loop._flushes import FlushRounds
from retinue.session import Event, Session, ToolResultEvent
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    RaiseMidStream,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import DEADLINE, OPTIONS, Next, last_end_reason, nap, runtime
from tests.scenarios._supervisor_kit import SlowFlushStore, record


class DriverBugError(RuntimeError):
    """The simulated bug."""


def _interrupt_at_the_tool_call(event: Event) -> None:
    if event.type == "tool/call":
        raise KeyboardInterrupt


async def _ask_into_ctrl_c(store: MemoryStore, agents: list[retinue.Agent]) -> None:
    model = ScriptedModel(
        [CallTools([ToolCallSpec("nap", '{"seconds": 100}', id="c1")]), Reply("never")]
    )
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model, tools=[nap], store=store) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            agents.append(agent)
            agent.session.observe(_interrupt_at_the_tool_call)
            await agent.ask("go")


async def test_ctrl_c_a_crash_cut_short_as_it_closed_the_turn_still_ends_the_runtime(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.10, DESIGN 4: Ctrl-C raised in a turn (here, by a session observer) whose close then
    crashes the driver comes out of ``open_runtime`` once the supervisor has closed the turn as the
    crash, answered its ask and committed the log: the crash does not take Ctrl-C's place, with the
    driver restarted and the runtime running on as if no Ctrl-C had come.

    Breaks ``TurnState.answer_dangling_calls``, which closing the interrupted step calls.
    """

    def broken(self: _state.TurnState, code: str, text: str) -> None:
        raise DriverBugError("answer_dangling_calls bug")

    monkeypatch.setattr(_state.TurnState, "answer_dangling_calls", broken)
    store = MemoryStore()
    agents: list[retinue.Agent] = []
    caught: BaseException | None = None
    try:
        await _ask_into_ctrl_c(store, agents)
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"
    (agent,) = agents
    events = agent.session.events
    check_session_invariants(events)
    assert last_end_reason(events).code == "DRIVER_CRASH"
    assert agent.status == "disposed"
    assert store.statistics().committed_events == len(events)


async def test_ctrl_c_a_flusher_crash_cut_short_still_ends_the_runtime(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.10, DESIGN 4: Ctrl-C raised in the agent's flusher (here, by a session/flush listener)
    whose flush owed on the way out then crashes the flusher comes out of ``open_runtime``: the
    crash does not take Ctrl-C's place, with the flusher restarted and the runtime running on.

    Breaks the flusher's shielded flush, which it runs for a flush owed as Ctrl-C unwinds it.
    """

    async def broken(_core: object, _turn: int, _step: int) -> None:
        with trio.CancelScope(shield=True):  # shielded, as the flush it stands for
            await trio.lowlevel.checkpoint()
        raise DriverBugError("flush_shielded bug")

    monkeypatch.setattr(_driver, "flush_shielded", broken)
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            async with retinue.open_runtime(models=ScriptedModel([Reply("never")])) as rt:
                agent = await rt.create_agent("a", OPTIONS)

                interrupted: list[int] = []

                async def interrupt(_agent: object, _session: object) -> None:
                    await trio.sleep(1)
                    if not interrupted:
                        interrupted.append(1)
                        raise KeyboardInterrupt

                rt.hooks.on("session/flush", interrupt, agent=agent)
                agent.inject("first")
                await trio.sleep(0.5)
                agent.inject("second")  # owed while the first flush runs
                await trio.sleep(10)
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"


def _interrupt_at_a_synthetic_result(event: Event) -> None:
    if isinstance(event.data, ToolResultEvent) and event.data.is_error:
        raise KeyboardInterrupt


async def test_ctrl_c_from_an_observer_of_a_crashed_turns_closing_event_leaves_it_closed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R4.8, R7.44, R12.10: Ctrl-C raised by a session observer as the supervisor logs a crashed
    turn's closing events (here, the running call's synthetic result) ends the runtime once the rest
    are logged, as it does when raised on a turn's own closing events, rather than leaving the step
    and the turn open, and stored so.

    Breaks ``TurnState.answer_dangling_calls`` and cancels while a tool runs.
    """

    def broken(self: _state.TurnState, code: str, text: str) -> None:
        raise DriverBugError("answer_dangling_calls bug")

    monkeypatch.setattr(_state.TurnState, "answer_dangling_calls", broken)
    model = ScriptedModel([CallTools([ToolCallSpec("nap", '{"seconds": 100}', id="c1")])])
    store = MemoryStore()
    agents: list[retinue.Agent] = []
    reported: list[object] = []
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            async with retinue.open_runtime(models=model, tools=[nap], store=store) as rt:
                agent = await rt.create_agent("a", OPTIONS)
                agents.append(agent)
                agent.session.observe(_interrupt_at_a_synthetic_result)
                rt.hooks.on("agent/error", lambda *args: reported.append(args[-1]), agent=agent)
                agent.send("go")
                await trio.sleep(10)
                agent.cancel("stop")
                await agent.wait_idle()
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"
    events = agents[0].session.events
    check_session_invariants(events)
    assert last_end_reason(events).code == "DRIVER_CRASH"
    # Once as the failure that ended the turn, once as the crash its close then raised.
    assert [type(error) for error in reported] == [DriverBugError, DriverBugError]
    assert store.statistics().committed_events == len(events)


async def test_a_crash_handling_a_listeners_contained_system_exit_restarts_the_driver(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.45, R7.48, DESIGN 4: a crash raised as the turn handles its failure, a listener's
    ``SystemExit`` contained as that listener's error, is a crash like any other: the
    driver is restarted, and the ``SystemExit``, which never ended the runtime, does not
    come out of it.

    Breaks ``TurnState.record_error``; a prompt-submit listener raises ``SystemExit``.
    """

    def broken(self: _state.TurnState, error: BaseException) -> None:
        raise DriverBugError("record_error bug")

    def exits(_agent: retinue.Agent, _content: object, _source: object, _proceed: Next) -> NoReturn:
        raise SystemExit(2)

    async with runtime(ScriptedModel([Reply("fine")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        restarts = record(rt, agent, "agent/restarted")
        monkeypatch.setattr(_state.TurnState, "record_error", broken)
        unsubscribe = rt.hooks.on("agent/prompt-submit", exits, agent=agent)
        result = await agent.ask("go")
        unsubscribe()
        monkeypatch.undo()
        assert (result.reason.code, len(restarts)) == ("DRIVER_CRASH", 1)
        assert (await agent.ask("again")).reason.kind == "completed"


def _turned_into_an_error(interruption: BaseException) -> RuntimeError:
    """An error as ``except KeyboardInterrupt: raise RuntimeError(...)`` leaves it."""
    error = RuntimeError("the user aborted the request")
    error.__context__ = interruption
    return error


async def _raised(scenario: Callable[[], Awaitable[None]]) -> BaseException | None:
    """What *scenario* raised, Ctrl-C too, which reaching pytest would end the test run."""
    try:
        await scenario()
    except BaseException as exc:  # judged by the caller
        return exc
    return None


async def test_a_crash_after_a_model_turned_ctrl_c_into_its_error_restarts_the_driver(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.45, DESIGN 4: a crash raised as the turn handles a model's error is a crash like any
    other, though the model made that error of a Ctrl-C it caught: the driver is restarted and the
    runtime runs on, not ended by the Ctrl-C found in the crash's context.

    Breaks ``TurnState.record_error``; the model's stream fails.
    """

    def broken(self: _state.TurnState, error: BaseException) -> None:
        raise DriverBugError("record_error bug")

    async def scenario() -> None:
        model = ScriptedModel(
            [RaiseMidStream(_turned_into_an_error(KeyboardInterrupt())), Reply("later")]
        )
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            restarts = record(rt, agent, "agent/restarted")
            monkeypatch.setattr(_state.TurnState, "record_error", broken)
            result = await agent.ask("go")
            monkeypatch.undo()
            assert (result.reason.code, len(restarts)) == ("DRIVER_CRASH", 1)
            assert (await agent.ask("again")).text == "later"

    assert await _raised(scenario) is None


async def test_a_flusher_crash_of_a_ctrl_c_turned_into_an_error_restarts_the_flusher(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: a flusher crash whose context holds a Ctrl-C already turned into an error is a
    crash like any other: the flusher is restarted and the runtime runs on, not ended by the Ctrl-C
    found in the context.

    Breaks the flusher's ``flush`` once.
    """
    real = _turn.flush
    crashes: list[int] = []

    async def broken(core: AgentCore, turn: int, step: int) -> None:
        if not crashes:
            crashes.append(1)
            error = DriverBugError("flush bug")
            error.__context__ = _turned_into_an_error(KeyboardInterrupt())
            raise error
        await real(core, turn, step)

    async def scenario() -> None:
        async with runtime(ScriptedModel([Reply("fine")])) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            restarts = record(rt, agent, "agent/restarted")
            agent.inject("idle")
            await agent.wait_idle()
            assert (crashes, len(restarts)) == ([1], 1)
            assert (await agent.ask("go")).text == "fine"

    monkeypatch.setattr(_driver, "flush", broken)
    assert await _raised(scenario) is None


class _LogThatFails:
    """A logger whose ``exception`` fails: a bug in a handler that contains a failure."""

    def exception(self, *_args: object, **_kwargs: object) -> NoReturn:
        raise DriverBugError("logging bug")


def _fail_at_turn_end(event: Event) -> None:
    if event.type == "turn/end":
        raise RuntimeError("turn/end observer")


async def _ask_into_ctrl_c_in_the_model(agents: list[retinue.Agent]) -> None:
    model = ScriptedModel([RaiseMidStream(KeyboardInterrupt()), Reply("never")])
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            agents.append(agent)
            agent.session.observe(_fail_at_turn_end)
            await agent.ask("go")
            await trio.sleep(10)


async def test_ctrl_c_in_the_model_still_ends_the_runtime_when_a_nested_handler_crashes(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.44, R12.10, DESIGN 4: Ctrl-C landing in the model's stream, which ends the runtime as
    trio has it, still does once the turn's close it unwound crashes in the handler containing a
    ``turn/end`` observer's failure: the crash, whose context is that failure, does not take its
    place, with the restarted driver running on.

    Breaks the logger ``TurnState.close_turn`` reports an observer's failure with.
    """
    monkeypatch.setattr(_state, "log", _LogThatFails())
    agents: list[retinue.Agent] = []
    caught: BaseException | None = None
    try:
        await _ask_into_ctrl_c_in_the_model(agents)
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"
    check_session_invariants(agents[0].session.events)


def _chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    context: BaseException | None = error
    while context is not None and context not in chain:
        chain.append(context)
        context = context.__context__
    return chain


def _interrupt_at_the_step_start(event: Event) -> None:
    if event.type == "step/start":
        raise KeyboardInterrupt


async def test_ctrl_c_going_on_after_a_crash_keeps_its_own_context(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R12.10: the Ctrl-C a crashed turn's close unwound (here, a session observer's on
    ``step/start``) comes out of the runtime with the context it had, not the crash, so its
    traceback does not read as if Ctrl-C came while the crash was handled, the reverse of what
    happened.

    Breaks ``TurnState.answer_dangling_calls``, which closing the interrupted step calls.
    """

    def broken(self: _state.TurnState, code: str, text: str) -> None:
        raise DriverBugError("answer_dangling_calls bug")

    monkeypatch.setattr(_state.TurnState, "answer_dangling_calls", broken)
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            async with retinue.open_runtime(models=ScriptedModel([Reply("never")])) as rt:
                agent = await rt.create_agent("a", OPTIONS)
                agent.session.observe(_interrupt_at_the_step_start)
                await agent.ask("go")
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"
    assert not any(isinstance(error, DriverBugError) for error in _chain(caught))


async def test_ctrl_c_answers_a_crashed_batch_once_its_turn_is_flushed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.49, R12.10, DESIGN 4: under Ctrl-C the ask of a turn whose close crashed is answered once
    the supervisor has flushed the turn, as a turn's own interrupted close answers after its
    shielded flush, not at once, before the store has any of the turn.

    Breaks ``TurnState.answer_dangling_calls``; the store's flush takes 5 virtual seconds.
    """

    def broken(self: _state.TurnState, code: str, text: str) -> None:
        raise DriverBugError("answer_dangling_calls bug")

    monkeypatch.setattr(_state.TurnState, "answer_dangling_calls", broken)
    store = SlowFlushStore()
    answered: list[tuple[str | None, int, int]] = []

    async def scenario() -> None:
        model = ScriptedModel([CallTools([ToolCallSpec("nap", '{"seconds": 100}', id="c1")])])
        with trio.fail_after(DEADLINE):
            async with (
                trio.open_nursery() as outer,
                retinue.open_runtime(models=model, tools=[nap], store=store) as rt,
            ):
                agent = await rt.create_agent("a", OPTIONS)
                agent.session.observe(_interrupt_at_the_tool_call)

                async def ask() -> None:
                    result = await agent.ask("go")
                    events = len(agent.session.events)
                    answered.append((result.reason.code, store.committed(), events))

                outer.start_soon(ask)
                await trio.sleep(100)

    caught = await _raised(scenario)
    assert caught is not None
    assert is_interrupt(caught), f"got {caught!r}"
    ((code, committed, events),) = answered
    assert (code, committed) == ("DRIVER_CRASH", events)


def _crashing_once_under_ctrl_c(fn: Callable[..., object]) -> Callable[..., object]:
    """*fn*, raising DriverBugError the first time it is called while Ctrl-C is handled."""
    crashed: list[int] = []

    def wrapped(*args: object, **kwargs: object) -> object:
        if not crashed and isinstance(sys.exc_info()[1], KeyboardInterrupt):
            crashed.append(1)
            raise DriverBugError(f"{fn.__qualname__} bug")
        return fn(*args, **kwargs)

    return wrapped


async def _ask_with_ctrl_c_from_the_status_listener() -> None:
    with trio.fail_after(DEADLINE):
        async with (
            trio.open_nursery() as nursery,
            retinue.open_runtime(models=ScriptedModel([Reply("x")])) as rt,
        ):
            agent = await rt.create_agent("a", OPTIONS)

            def interrupt(_agent: object, status: str) -> None:
                if status == "running":
                    raise KeyboardInterrupt

            rt.hooks.on("agent/status", interrupt, agent=agent)
            nursery.start_soon(agent.ask, "go")
            await trio.sleep(50)
            nursery.cancel_scope.cancel()


async def test_ctrl_c_the_driver_unwinds_outside_a_turn_survives_a_crash_settling_its_prompts(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.10, DESIGN 4: Ctrl-C the driver unwinds outside a turn (an agent/status listener's as the
    agent starts running) still ends the runtime when settling the prompts it held then crashes: the
    supervisor finds the Ctrl-C recorded, rather than restarting the driver for the runtime to run
    on.

    Breaks ``AgentCore.discard_pending``, which the driver calls as it unwinds.
    """
    monkeypatch.setattr(
        AgentCore, "discard_pending", _crashing_once_under_ctrl_c(AgentCore.discard_pending)
    )
    caught = await _raised(_ask_with_ctrl_c_from_the_status_listener)
    assert caught is not None
    assert is_interrupt(caught), f"got {caught!r}"


async def test_ctrl_c_before_turn_start_survives_a_crash_settling_its_batch(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.10, DESIGN 4: Ctrl-C landing in the driver before ``turn/start`` still ends the runtime
    when settling its batch ``disposed`` then crashes: the Ctrl-C is not lost.

    Breaks ``_turn._turn_body`` (Ctrl-C) and ``_driver.settle`` (the crash).
    """

    async def interrupted(*_args: object) -> NoReturn:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    monkeypatch.setattr(_turn, "_turn_body", interrupted)
    monkeypatch.setattr(_driver, "settle", _crashing_once_under_ctrl_c(settle))

    async def scenario() -> None:
        with trio.fail_after(DEADLINE):
            async with (
                trio.open_nursery() as nursery,
                retinue.open_runtime(models=ScriptedModel([Reply("x")])) as rt,
            ):
                agent = await rt.create_agent("a", OPTIONS)
                nursery.start_soon(agent.ask, "go")
                await trio.sleep(50)
                nursery.cancel_scope.cancel()

    caught = await _raised(scenario)
    assert caught is not None
    assert is_interrupt(caught), f"got {caught!r}"


class _CtrlCOnFirstFlush(SlowFlushStore):
    """A durable store whose first flush raises Ctrl-C in the flusher."""

    flushes = 0

    async def flush(self, session: Session) -> None:
        self.flushes += 1
        if self.flushes == 1:
            await trio.lowlevel.checkpoint()
            raise KeyboardInterrupt
        await super().flush(session)


async def test_ctrl_c_the_flusher_unwinds_survives_a_crash_ending_its_rounds(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.10, DESIGN 4: Ctrl-C raised in the flusher (by the store's flush) still ends the runtime
    when ending its flush rounds then crashes: what it unwound is not forgotten once its own flush
    is over, leaving the restarted flusher to run on.

    Breaks ``FlushRounds.stop``, which the flusher calls as it ends.
    """
    monkeypatch.setattr(FlushRounds, "stop", _crashing_once_under_ctrl_c(FlushRounds.stop))

    async def scenario() -> None:
        with trio.fail_after(DEADLINE):
            store = _CtrlCOnFirstFlush()
            async with retinue.open_runtime(models=ScriptedModel([]), store=store) as rt:
                agent = await rt.create_agent("a", OPTIONS)
                agent.inject("idle")
                await trio.sleep(50)

    caught = await _raised(scenario)
    assert caught is not None
    assert is_interrupt(caught), f"got {caught!r}"
