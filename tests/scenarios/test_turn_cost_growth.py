"""A turn costs as much late in a long session as early in it (nothing per step grows
with the session's length).

Counted in function calls and lines of Python run, the runtime's and trio's, which
repeat from turn to turn within a few, where timings would not: a walk over the log,
the history or the listeners' records once per step or event adds thousands by turn 300. The timed
figure is ``python -m benchmarks.overhead --growth``; this keeps the property in the suite.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

import pytest
import trio
import trio.testing
from benchmarks.overhead import fetch, workload_model

import retinue
from tests.helpers import OPTIONS, runtime

EARLY, LATE = 10, 300
SLACK = 1.01
"""How much a turn's count may differ from another's with nothing growing (trio's
scheduler batches tasks differently from turn to turn): a dozen in 8,000 here, where a
walk over the log at each step adds about 170 a turn."""


async def _calls_of(turn: Callable[[], Any]) -> int:
    """How many functions run (Python's and builtins) and lines of Python execute while
    *turn* is awaited: a loop over the log holding no call shows in its lines."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    # A collection would run the finalizers of whatever earlier tests left behind, and
    # count their calls: none runs while counting.
    gc.collect()
    gc.disable()
    tracing, profiling = sys.gettrace(), sys.getprofile()
    sys.setprofile(profile)
    sys.settrace(trace)
    try:
        await turn()
    finally:
        sys.settrace(tracing)
        sys.setprofile(profiling)
        gc.enable()
    return count


def _walks_the_log(agent: retinue.Agent) -> Callable[..., None]:
    """A listener that reads every event logged so far at each step: growth to be found."""

    def listener(*_args: object) -> None:
        for event in agent.session.events:
            assert event.seq >= 0

    return listener


async def _turn_calls(setup: str) -> dict[int, int]:
    """Calls of turn EARLY and turn LATE of one agent's session under *setup*."""
    counted: dict[int, int] = {}
    async with runtime(workload_model(), tools=[fetch]) as rt:
        agent = await rt.create_agent("long", OPTIONS)
        if setup == "listeners":
            rt.hooks.on("session/event", lambda *_: None, agent=agent)
            rt.hooks.on("agent/status", lambda *_: None)
        elif setup == "walking listener":
            rt.hooks.on("agent/status", _walks_the_log(agent), agent=agent)
        for turn in range(1, LATE + 1):
            if turn in (EARLY, LATE):
                counted[turn] = await _calls_of(partial(agent.ask, f"prompt {turn}"))
            else:
                if turn % 7 == 0:
                    agent.send(f"queued before prompt {turn}")
                await agent.ask(f"prompt {turn}")
    return counted


@pytest.mark.parametrize("setup", ["plain", "listeners"])
async def test_a_turn_late_in_a_long_session_runs_as_many_calls_as_an_early_one(
    setup: str, autojump_clock: trio.testing.MockClock
) -> None:
    """R4.8, R5.1: turn 300 of a session runs as many calls and lines as turn 10 (within
    a few), with an agent's and every agent's listeners registered or without, prompts
    sometimes queued during a turn."""
    counted = await _turn_calls(setup)
    assert counted[LATE] <= counted[EARLY] * SLACK, counted


async def test_the_count_finds_a_listener_that_walks_the_log_each_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The measure can fail: a listener reading the whole log at each status change makes
    turn 300 run tens of thousands more lines than turn 10."""
    counted = await _turn_calls("walking listener")
    assert counted[LATE] > counted[EARLY] * 2, counted
