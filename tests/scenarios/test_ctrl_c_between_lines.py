"""Ctrl-C landing between two lines of an agent's driver, where trio's signal handler raises it
(code not KI-protected): the runtime ends at once, open_runtime raises the KeyboardInterrupt,
and the turn in flight is closed with a log every later request can be built from (R9.25,
R12.9, R12.10).

A trace function raises it on a chosen line, as the handler would when the signal comes
there, and only where the handler would: a KI-protected frame hands Ctrl-C to the main task.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.testing import (
    CallTools,
    InvariantError,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import DEADLINE, OPTIONS, echo

# The signature sys.settrace takes.
_Trace = Callable[[FrameType, str, Any], Any]

_PACKAGE = Path(retinue.__file__).parent


@contextmanager
def _ctrl_c_at(lines: Callable[[FrameType], bool], nth: int) -> Iterator[list[str]]:
    """Raise Ctrl-C on the *nth* line run in a frame *lines* picks, counting only lines that
    are not KI-protected; yields the lines counted (function:line), their number its length."""
    counted: list[str] = []

    def local(frame: FrameType, event: str, _arg: object) -> _Trace | None:
        if event == "line" and not trio.lowlevel.currently_ki_protected():
            counted.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
            if len(counted) == nth:
                raise KeyboardInterrupt
        return local

    def trace(frame: FrameType, _event: str, _arg: object) -> _Trace | None:
        return local if lines(frame) else None

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        yield counted
    finally:
        sys.settrace(previous)


def _in(folder: str, *functions: str) -> Callable[[FrameType], bool]:
    """Picks the frames of *functions* defined in the *folder* of retinue."""
    where = str(_PACKAGE / folder)

    def picked(frame: FrameType) -> bool:
        code = frame.f_code
        return code.co_name in functions and code.co_filename.startswith(where)

    return picked


@pytest.mark.parametrize("function", ["_run_agent", "supervise"])
async def test_ctrl_c_on_the_first_lines_of_an_agents_driver_ends_the_runtime(
    autojump_clock: trio.testing.MockClock, function: str
) -> None:
    """R12.9, R12.10: Ctrl-C landing on the first line the driver's task runs of *function*
    ends the runtime: open_runtime raises it, or (the line protected) the ask completes; the
    runtime's close does not wait for good on a driver that never began."""
    outcome: list[BaseException | None] = []
    runtimes: list[retinue.Runtime] = []
    counted: list[str] = []
    ended = trio.Event()

    async def ask() -> None:
        nonlocal counted
        try:
            async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])) as rt:
                runtimes.append(rt)
                with _ctrl_c_at(_in("supervisors", function), 1) as lines:
                    counted = lines
                    agent = await rt.create_agent("a", OPTIONS)
                    await agent.ask("q")
        except BaseException as exc:  # judged below
            outcome.append(exc)
        else:
            outcome.append(None)
        finally:
            ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        with trio.move_on_after(DEADLINE):
            await ended.wait()
        hung = not ended.is_set()
        if hung:
            # The close waits, shielded, for the driver to end: let it go, so the test fails
            # rather than hang.
            for agent in runtimes[0].agents.list():
                _core_of(agent).driver_exited.set()
    assert not hung, "open_runtime hung"
    if counted:
        assert isinstance(outcome[0], KeyboardInterrupt), f"got {outcome[0]!r}"
    else:
        assert outcome == [None]


def _core_of(agent: retinue.Agent) -> Any:
    from retinue.supervisors._creation import core_of

    return core_of(agent)


def _two_calls() -> ScriptedModel:
    calls = [ToolCallSpec("echo", '{"text": "one"}'), ToolCallSpec("echo", '{"text": "two"}')]
    return ScriptedModel([CallTools(calls), Reply("done")])


# Where a step's events are appended and recorded: its message, its calls and results, its
# step/end and turn/end.
_APPENDS = (
    _in("loop", "_finish_step"),
    _in("loop", "close_step", "close_turn", "log_call", "log_result", "note_calls_if_logged"),
)


async def _ask_into_ctrl_c_at(
    nth: int, lines: Callable[[FrameType], bool] | None = None
) -> tuple[list[str], retinue.Agent]:
    """Ask an agent a turn with two tool calls, Ctrl-C landing on the *nth* line of the
    appends (or of the frames *lines* picks); the lines counted and the agent, once
    open_runtime raised Ctrl-C (if it came)."""
    picked = lines or (lambda frame: any(pick(frame) for pick in _APPENDS))
    agents: list[retinue.Agent] = []
    at: list[str] = []
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            async with retinue.open_runtime(models=_two_calls(), tools=[echo]) as rt:
                agents.append(await rt.create_agent("a", OPTIONS))
                with _ctrl_c_at(picked, nth) as counted:
                    at = counted
                    await agents[0].ask("go")
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    if len(at) >= nth:
        assert isinstance(caught, KeyboardInterrupt), f"line {at[-1]}: got {caught!r}"
    else:
        assert caught is None, f"got {caught!r}"
    return at, agents[0]


async def test_ctrl_c_on_any_line_of_a_steps_appends_leaves_a_closed_valid_log(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.15, R9.25, R12.10: Ctrl-C landing on any line of the appends of a step's message,
    its calls' ``tool/call`` and ``tool/result``, ``step/end`` and ``turn/end`` (before the
    event is logged, or after it and before the turn's state records it) ends the runtime
    with the turn closed: every logged call answered once, none logged twice."""
    nth = 1
    while True:
        at, agent = await _ask_into_ctrl_c_at(nth)
        if len(at) < nth:
            break  # every line counted has had its Ctrl-C
        events = agent.session.events
        where = f"Ctrl-C on line {at[-1]}"
        assert not agent.session.is_turn_open, f"{where}: the turn was left open"
        try:
            check_session_invariants(events)
        except InvariantError as exc:
            raise AssertionError(f"{where}: {exc}") from exc
        nth += 1
    assert nth > 10  # the lines were reached


async def test_ctrl_c_on_any_line_of_a_turns_own_run_leaves_it_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.44, R12.10: Ctrl-C landing on any line a turn's own run reaches, between its body
    and its ``turn/end`` too, ends the runtime with the turn closed and the log valid."""
    nth = 1
    while True:
        at, agent = await _ask_into_ctrl_c_at(nth, _in("loop", "run_turn"))
        if len(at) < nth:
            break
        where = f"Ctrl-C on line {at[-1]}"
        assert not agent.session.is_turn_open, f"{where}: the turn was left open"
        try:
            check_session_invariants(agent.session.events)
        except InvariantError as exc:
            raise AssertionError(f"{where}: {exc}") from exc
        nth += 1
    assert nth > 2  # the lines were reached
