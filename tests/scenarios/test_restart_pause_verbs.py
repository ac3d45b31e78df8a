"""An agent's verbs while its crashed driver pauses before a restart: a cancel is served at
once, as outside the pause, and a disposal or the runtime's close ends the pause (DESIGN 4;
SPEC R2.24-R2.28, R2.32, R7.4, R7.5, R12.9).

A driver crash is a bug in retinue itself, so these tests break the driver's
``TurnState`` (what readies a turn, after the agent went ``running``) once each
time they arm it, the batch then left queued for the restarted driver.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

import retinue
from retinue.loop import _core, _driver, _state, _turn
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import DEADLINE, OPTIONS, record_statuses, runtime, turn_ends, user_texts
from tests.scenarios._supervisor_kit import DriverBugError, record

PAUSE = 100.0
POLICY = retinue.RestartPolicy(max_restarts=5, backoff=PAUSE, max_backoff=PAUSE)
"""The second crash within the window pauses ``PAUSE`` virtual seconds before its restart."""
POLICY_OF_HOURS = retinue.RestartPolicy(max_restarts=5, backoff=3600.0, max_backoff=3600.0)
"""A pause no test on real time outlasts: what ends before ``REAL_DEADLINE`` did not wait for it."""
REAL_DEADLINE = 60.0


def crash_readying_when_armed(
    monkeypatch: pytest.MonkeyPatch, agent_id: str | None = None
) -> list[bool]:
    """Make the driver's next ``TurnState`` (of *agent_id*, if given) raise once each time
    the returned flag is armed."""
    real = _state.TurnState
    armed = [False]

    def broken(core: _core.AgentCore, turn: int) -> _state.TurnState:
        if armed[0] and agent_id in (None, core.id):
            armed[0] = False
            raise DriverBugError("TurnState bug")
        return real(core, turn)

    monkeypatch.setattr(_driver, "TurnState", broken)
    return armed


class _PauseHeard(logging.Handler):
    """Sets its event when a restart's pause is logged."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("restarting a task of agent"):
            self.paused.set()


@contextmanager
def _pause_logged() -> Iterator[trio.Event]:
    """An event set once a restart's pause is logged inside the ``with``."""
    heard = _PauseHeard()
    logger = logging.getLogger("retinue.supervisors")
    logger.addHandler(heard)
    try:
        yield heard.paused
    finally:
        logger.removeHandler(heard)


async def pausing_agent(
    rt: retinue.Runtime, monkeypatch: pytest.MonkeyPatch
) -> tuple[retinue.Agent, list[tuple[object, ...]]]:
    """An agent whose driver crashed twice readying a turn, the second time with a prompt
    still queued: its driver now pauses before its restart; and its ``agent/restarted`` calls."""
    agent = await rt.create_agent("a", OPTIONS)
    restarts = record(rt, agent, "agent/restarted")
    armed = crash_readying_when_armed(monkeypatch)
    armed[0] = True
    assert (await agent.ask("one")).reason.kind == "completed"
    armed[0] = True
    with _pause_logged() as paused:
        agent.send("two")
        # Logged as it begins, once the crash's flush is done (in a thread, for SQLite).
        await paused.wait()
    assert (agent.status, len(restarts)) == ("running", 1), "the second restart should pause"
    return agent, restarts


async def test_a_cancel_in_a_restart_pause_leaves_the_agent_idle_at_once(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R2.28, R7.5, R2.32: a cancel while the crashed driver pauses answers its prompts
    ``aborted``, turns the agent ``idle`` (an ``agent/status`` balancing the crashed start's
    ``running``) and releases ``wait_idle`` at once, as outside the pause, where it waited for
    the pause to end; the restart still comes when the pause ends, and the next prompt runs.
    Nothing was logged for the cancelled prompt (R7.6)."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), restart=POLICY) as rt:
        agent, restarts = await pausing_agent(rt, monkeypatch)
        statuses = record_statuses(rt, agent)
        asked: list[retinue.TurnResult] = []
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                asked.append(await agent.ask("three"))

            nursery.start_soon(ask)
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)
            cancelled_at = trio.current_time()
            agent.cancel("enough")
        assert trio.current_time() == cancelled_at, "wait_idle waited for the pause"
        assert (agent.status, statuses) == ("idle", ["idle"])
        assert [(r.turn, r.reason.kind, r.reason.reason) for r in asked] == [
            (0, "aborted", "enough")
        ]
        await agent.wait_idle()
        assert trio.current_time() == cancelled_at
        assert len(restarts) == 1
        assert (await agent.ask("four")).text == "ok"
        assert len(restarts) == 2, "the restart came past its pause"
        assert user_texts(agent.session.events) == ["one", "four"]
        assert turn_ends(agent.session.events) == ["completed", "completed"]
        check_session_invariants(agent.session.events)


async def test_a_prompt_sent_after_a_cancel_in_a_restart_pause_runs_after_the_restart(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R2.34, R7.4: a prompt sent once a cancel in the pause was served waits for the
    restarted driver, and ``wait_idle`` with it, as for any prompt queued in the pause; a
    second cancel in the same pause answers it ``aborted`` and releases that wait at once."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), restart=POLICY) as rt:
        agent, _restarts = await pausing_agent(rt, monkeypatch)
        agent.cancel()
        asked: list[retinue.TurnResult] = []
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                asked.append(await agent.ask("three"))

            nursery.start_soon(ask)
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)
            assert not asked
            cancelled_at = trio.current_time()
            agent.cancel("again")
        assert trio.current_time() == cancelled_at
        assert [r.reason.reason for r in asked] == ["again"]
        assert agent.status == "idle"  # type: ignore[comparison-overlap]  # changed since
        started = trio.current_time()
        result = await agent.ask("four")
        assert result.text == "ok"
        assert trio.current_time() >= started + 50, "served by the restarted driver"
        assert user_texts(agent.session.events) == ["one", "four"]


async def test_a_prompt_sent_right_after_a_cancel_in_a_restart_pause_keeps_wait_idle_waiting(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2.34, R7.4: a prompt sent after a cancel in the pause, before the pause served it, is
    new work: the agent stays ``running`` and a ``wait_idle`` waiting since before the cancel
    returns only once the restarted driver has run that prompt's turn."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), restart=POLICY) as rt:
        agent, restarts = await pausing_agent(rt, monkeypatch)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)
            agent.cancel()
            agent.send("replacement")
            await trio.sleep(1)
            assert agent.status == "running"
        assert (len(restarts), agent.status) == (2, "idle"), "wait_idle returned before the restart"
        assert user_texts(agent.session.events) == ["one", "replacement"]


@pytest.mark.parametrize("how", ["dispose", "aclose"])
async def test_a_disposal_in_a_restart_pause_ends_it_and_answers_its_prompts(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """R2.35, R12.9, R12.10: disposing the agent, or closing its runtime, while its crashed
    driver pauses answers the queued prompt ``disposed`` and tears the agent down at once,
    with no restart and nothing logged for the prompt."""
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(
            models=ScriptedModel([Reply("ok")], repeat_last=True), restart=POLICY
        ) as rt:
            agent, restarts = await pausing_agent(rt, monkeypatch)
            asked: list[retinue.TurnResult] = []
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    asked.append(await agent.ask("three"))

                nursery.start_soon(ask)
                await trio.sleep(1)
                started = trio.current_time()
                await (agent.dispose() if how == "dispose" else rt.aclose())
            assert trio.current_time() == started
            assert [r.reason.kind for r in asked] == ["disposed"]
            assert (agent.status, len(restarts)) == ("disposed", 1)
            assert rt.agents.get(agent.id) is None
            assert user_texts(agent.session.events) == ["one"]
            check_session_invariants(agent.session.events)


async def test_a_cancel_in_a_restart_pause_on_a_sqlite_store_keeps_the_stored_log_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2.28, R2.32, R11.7, on a real SQLite file (real time: its threads): ``wait_idle``
    returns once a cancel in a restart pause is served, before the restart is announced, not
    when the pause ends; the agent is torn down with the pause still under way, and the stored
    log is the live one, nothing of the cancelled prompt in it."""
    path = str(tmp_path / "sessions.db")
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(REAL_DEADLINE):
        async with retinue.open_runtime(
            models=model, restart=POLICY_OF_HOURS, store=retinue.SQLiteStore(path)
        ) as rt:
            agent, restarts = await pausing_agent(rt, monkeypatch)
            agent.cancel()
            await agent.wait_idle()
            assert (agent.status, len(restarts)) == ("idle", 1)
            await agent.dispose()
        async with retinue.SQLiteStore(path) as store:
            stored = await store.load(agent.id)
    assert stored.dump() == agent.session.dump()
    assert user_texts(stored.events) == ["one"]


async def test_a_cancel_in_a_pause_entered_idle_releases_a_wait_for_a_prompt_sent_in_it(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2.28, R7.5: a crash in a turn's flush, after its end, pauses with the agent ``idle``;
    a prompt sent in the pause holds ``wait_idle``, and a cancel answers it ``aborted`` and
    releases that wait at once (the cancel is spent in the pause: the restarted driver has
    nothing to release)."""
    real_flush = _turn.flush
    armed = [0]

    async def crashing_flush(core: _core.AgentCore, turn: int, step: int) -> None:
        if armed[0]:
            armed[0] -= 1
            raise DriverBugError("flush bug")
        await real_flush(core, turn, step)

    monkeypatch.setattr(_turn, "flush", crashing_flush)
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), restart=POLICY) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        armed[0] = 2
        with _pause_logged() as paused:
            await agent.ask("one")
            await agent.ask("two")
            await paused.wait()
        assert agent.status == "idle"  # type: ignore[comparison-overlap]  # changed since
        asked: list[retinue.TurnResult] = []
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                asked.append(await agent.ask("three"))

            nursery.start_soon(ask)
            await trio.sleep(1)
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)
            cancelled_at = trio.current_time()
            agent.cancel("enough")
        assert trio.current_time() == cancelled_at, "wait_idle waited past the cancel"
        assert [r.reason.kind for r in asked] == ["aborted"]
        assert user_texts(agent.session.events) == ["one", "two"]


@pytest.mark.parametrize("steered", [False, True])
async def test_a_parent_cancel_withdrawing_the_prompt_of_a_restart_pause_is_served_at_once(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    """R2.29, R2.32, R3.10: the prompt a crashed driver left queued is another agent's ask;
    that agent's cancel in the pause withdraws it, and the agent goes ``idle`` and releases
    ``wait_idle`` at once, as outside the pause, where it waited for the pause to end. A steer
    sent in the pause before that cancel is the restarted driver's next prompt, not left
    stranded in the mailbox."""
    peers: dict[str, retinue.Agent] = {}

    @retinue.tool
    async def ask_worker() -> str:
        """Ask the worker."""
        return (await peers["a"].ask("from orch")).reason.kind

    model = ScriptedModel(
        {
            "orch": [CallTools([ToolCallSpec("ask_worker", "{}", id="c1")]), Reply("orch done")],
            "scripted": [Reply("ok")],
        },
        repeat_last=True,
    )
    async with runtime(model, tools=[ask_worker], restart=POLICY) as rt:
        agent = peers["a"] = await rt.create_agent("a", OPTIONS)
        orch = await rt.create_agent("orch", retinue.AgentOptions(model="orch"))
        armed = crash_readying_when_armed(monkeypatch, agent.id)
        armed[0] = True
        assert (await agent.ask("one")).reason.kind == "completed"
        armed[0] = True
        with _pause_logged() as paused:
            orch.send("go")
            await paused.wait()
        assert agent.status == "running", "the second crash should pause with the ask queued"
        if steered:
            agent.steer("steered in the pause")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)
            cancelled_at = trio.current_time()
            orch.cancel("boss")
        if steered:
            assert trio.current_time() >= cancelled_at + PAUSE - 2, "the steer ran before"
            assert user_texts(agent.session.events) == ["one", "steered in the pause"]
        else:
            assert trio.current_time() == cancelled_at, "wait_idle waited for the pause"
            assert user_texts(agent.session.events) == ["one"]
        assert agent.status == "idle"  # type: ignore[comparison-overlap]  # changed since
        for each in (agent, orch):
            check_session_invariants(each.session.events)
