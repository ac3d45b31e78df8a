"""Restart policy of the root supervisor: validation and backoff (DESIGN 4; SPEC R2.35, R12.9).

A driver crash is a bug in retinue itself, so no public input can cause one:
as in ``test_supervisor.py``, the tests break ``AgentCore.set_status`` for
``running`` transitions, the one honest way to inject such a bug.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.loop import _core
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime
from tests.scenarios._supervisor_kit import crash_flusher


class DriverBugError(RuntimeError):
    """The simulated bug."""


def crash_every_start(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Make every ``running`` transition raise; returns the virtual times of the crashes."""
    real = _core.AgentCore.set_status
    crashes: list[float] = []

    def set_status(self: _core.AgentCore, status: Any) -> None:
        if status == "running":
            crashes.append(trio.current_time())
            raise DriverBugError(f"set_status bug #{len(crashes)}")
        real(self, status)

    monkeypatch.setattr(_core.AgentCore, "set_status", set_status)
    return crashes


def gaps(times: list[float]) -> list[float]:
    return [round(later - earlier, 6) for earlier, later in itertools.pairwise(times)]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"window": 0.0}, "window"),
        ({"window": -5.0}, "window"),
        ({"window": math.nan}, "window"),
        ({"max_restarts": -1}, "max_restarts"),
        ({"max_restarts": 1.5}, "max_restarts"),
        ({"max_restarts": True}, "max_restarts"),
        ({"backoff": 0.0}, "backoff"),
        ({"backoff": math.inf}, "backoff"),
        ({"max_backoff": math.inf}, "max_backoff"),
        ({"backoff": 10**400}, "backoff"),
        ({"max_backoff": 10**400}, "max_backoff"),
        ({"backoff": 2.0, "max_backoff": 1.0}, "max_backoff"),
    ],
)
def test_restart_policy_refuses_a_field_out_of_range(fields: dict[str, Any], named: str) -> None:
    """DESIGN 4, as R2.6 for agent options: a policy is validated when it is built, with a typed
    error naming the field. A zero window would forget every crash at once and restart a crashing
    driver forever. An int too large for a float is refused so too, not a bare ``OverflowError``.
    """
    with pytest.raises(retinue.ConfigError, match=f"RestartPolicy.{named} "):
        retinue.RestartPolicy(**fields)


@pytest.mark.parametrize("window", [1e-9, 0.001, 0.999])
def test_restart_policy_refuses_a_window_shorter_than_a_second(window: float) -> None:
    """DESIGN 4: a window shorter than a crashed driver takes to restart and crash again
    forgets every crash, as a zero one would: accepted, ``window=1e-9`` restarted a driver
    crashing as it starts at once, thousands of times a second, never giving it up."""
    with pytest.raises(retinue.ConfigError, match=r"^RestartPolicy.window must be at least 1 "):
        retinue.RestartPolicy(window=window)
    assert retinue.RestartPolicy(window=1).window == 1


def test_restart_policy_accepts_an_infinite_window() -> None:
    """DESIGN 4: an infinite window remembers every crash: ``max_restarts`` over the agent's life."""
    assert retinue.RestartPolicy(window=math.inf, max_restarts=0).max_restarts == 0


@pytest.mark.parametrize(
    ("backoff", "max_backoff", "crashes"),
    [(1e-300, 1e300, 10**9), (1e-300, 1e300, 2000), (1e-10, 1e10, 100), (0.5, 30.0, 10**9)],
)
def test_restart_policy_pause_reaches_max_backoff_however_far_apart(
    backoff: float, max_backoff: float, crashes: int
) -> None:
    """DESIGN 4: the pause doubles up to ``max_backoff`` and stays there, even when
    ``max_backoff / backoff`` exceeds any fixed cap on the doublings (or overflows a float).
    """
    policy = retinue.RestartPolicy(backoff=backoff, max_backoff=max_backoff)
    assert policy.pause(crashes) == max_backoff


def test_restart_policy_pause_doubles_from_backoff() -> None:
    """DESIGN 4: no pause for the first crash, then ``backoff`` doubling, capped."""
    policy = retinue.RestartPolicy(backoff=1e-300, max_backoff=1e300)
    assert [policy.pause(n) for n in (1, 2, 3, 4)] == [0.0, 1e-300, 2e-300, 4e-300]
    assert policy.pause(70) == 1e-300 * 2.0**68


async def test_a_driver_that_crashes_as_it_starts_is_given_up_after_growing_pauses(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R2.35: the first restart is immediate, later ones wait ``backoff`` doubling
    up to ``max_backoff``; pauses do not count toward the window, so even a window far
    shorter than the pauses gives up a driver that crashes every time it starts.
    """
    policy = retinue.RestartPolicy(window=1.0, max_restarts=5, backoff=2.0, max_backoff=8.0)
    with trio.fail_after(100):
        async with runtime(ScriptedModel([Reply("never")]), restart=policy) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            crashes = crash_every_start(monkeypatch)
            result = await agent.ask("go")
            await agent.wait_idle()
            assert gaps(crashes) == [0.0, 2.0, 4.0, 8.0, 8.0]
            assert result.reason.kind == "disposed"
            assert agent.status == "disposed"
            assert rt.agents.get(agent.id) is None


async def test_a_crash_loop_with_many_restarts_allowed_is_paced(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: a large ``max_restarts`` does not restart back to back: the default pauses (0.5 s
    doubling up to 30 s) cap the crash rate, so a crash loop cannot spin the CPU.
    """
    policy = retinue.RestartPolicy(max_restarts=1000)
    with trio.fail_after(1000):
        async with runtime(ScriptedModel([Reply("never")]), restart=policy) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            crashes = crash_every_start(monkeypatch)
            agent.send("go")
            await trio.sleep(120)
            assert gaps(crashes) == [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
            assert agent.status != "disposed"
            await agent.dispose()


async def test_dispose_ends_a_restart_pause_at_once(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.9, R2.35: disposal waits for the driver to exit; a driver pausing before its
    restart exits as soon as the agent is disposed, not when the pause would end.
    """
    policy = retinue.RestartPolicy(max_restarts=5, backoff=500.0, max_backoff=500.0)
    with trio.fail_after(100):
        async with runtime(ScriptedModel([Reply("never")]), restart=policy) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            crashes = crash_every_start(monkeypatch)
            agent.send("go")
            await trio.sleep(1)
            assert len(crashes) == 2, "the second restart should be pausing"
            started = trio.current_time()
            await agent.dispose()
            assert trio.current_time() - started < 1
            assert len(crashes) == 2
            assert agent.status == "disposed"
            assert rt.agents.get(agent.id) is None


def crash_when_armed(monkeypatch: pytest.MonkeyPatch) -> tuple[list[float], list[bool]]:
    """Make the next ``running`` transition raise once each time the returned flag is armed."""
    real = _core.AgentCore.set_status
    crashes: list[float] = []
    armed = [False]

    def set_status(self: _core.AgentCore, status: Any) -> None:
        if status == "running" and armed[0]:
            armed[0] = False
            crashes.append(trio.current_time())
            raise DriverBugError(f"set_status bug #{len(crashes)}")
        real(self, status)

    monkeypatch.setattr(_core.AgentCore, "set_status", set_status)
    return crashes, armed


@pytest.mark.parametrize(("apart", "given_up"), [(9.5, True), (10.0, False)])
async def test_a_crash_is_remembered_for_less_than_the_window(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    apart: float,
    given_up: bool,
) -> None:
    """DESIGN 4: a crash counts against ``max_restarts`` while it is less than ``window``
    seconds of running time old: one exactly ``window`` old is forgotten."""
    policy = retinue.RestartPolicy(window=10.0, max_restarts=1, backoff=7.0, max_backoff=7.0)
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), restart=policy) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        crashes, armed = crash_when_armed(monkeypatch)
        armed[0] = True
        # The crash comes before the turn is logged: the restarted driver serves the prompt.
        assert (await agent.ask("one")).reason.kind == "completed"
        await trio.sleep_until(crashes[0] + apart)
        armed[0] = True
        second = await agent.ask("two")
        assert crashes == [crashes[0], crashes[0] + apart]
        if given_up:
            assert second.reason.kind == "disposed"
            assert agent.status == "disposed"
        else:
            assert second.reason.kind == "completed"
            assert trio.current_time() == crashes[1], "the restart did not pause"


async def test_a_flusher_crash_during_the_driver_restart_pause_counts_running_time_only(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: the window counts running time, a pause under way excluded: a flusher crash
    15 s into the driver's 20 s restart pause is as close to the driver's two crashes as if
    no time had passed, and the third crash within the window gives the agent up."""
    policy = retinue.RestartPolicy(window=10.0, max_restarts=2, backoff=20.0, max_backoff=20.0)
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), restart=policy) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        crashes, armed = crash_when_armed(monkeypatch)
        armed[0] = True
        assert (await agent.ask("one")).reason.kind == "completed"
        armed[0] = True
        agent.send("two")
        await trio.sleep(15)
        assert len(crashes) == 2, "the driver should be pausing before its second restart"
        flusher_crashes = crash_flusher(monkeypatch, times=1)
        agent.inject("while the driver pauses")
        await trio.sleep(1)
        assert flusher_crashes == [1]
        assert agent.status == "disposed"


async def test_agent_restarted_is_heard_as_a_paused_driver_starts_again(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: ``agent/restarted`` is heard when the crashed driver starts again, past its
    pause: a restart pausing is not announced yet, and one the agent's disposal ends never is."""
    policy = retinue.RestartPolicy(max_restarts=5, backoff=10.0, max_backoff=10.0)
    with trio.fail_after(100):
        async with runtime(ScriptedModel([Reply("never")]), restart=policy) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            restarts: list[float] = []
            rt.hooks.on(
                "agent/restarted", lambda *_args: restarts.append(trio.current_time()), agent=agent
            )
            crashes = crash_every_start(monkeypatch)
            agent.send("go")
            await trio.sleep(1)
            assert (gaps(crashes), restarts) == ([0.0], [crashes[0]]), "the second should pause"
            await trio.sleep(10)
            assert gaps(crashes) == [0.0, 10.0]
            assert restarts == [crashes[0], crashes[2]], "heard as the driver started again"
            await agent.dispose()
            assert restarts == [crashes[0], crashes[2]], "a restart the disposal ended was heard"
