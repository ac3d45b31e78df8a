"""Flusher supervision: a crashed flusher is its agent's crash, restarted or given up
under the driver's policy, and ``wait_idle`` across its restart pause
(DESIGN 4; SPEC R2.21, R12.9).

A flusher crash, like a driver crash, is a bug in retinue itself: no public
input can make one. The crash tests therefore monkeypatch the private
``flush`` the flusher calls to raise; that is the only honest way to inject
such a bug.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue.stores import MemoryStore
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, of_type, runtime, texts
from tests.scenarios._supervisor_kit import FlusherBugError, crash_flusher, record


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
    """R2.21, R7.2: ``wait_idle`` after an idle injection returns once that injection is flushed,
    also while the flusher waits out a restart pause: the restarted flusher flushes it. It does not
    return at once, before the flush, on finding the crashed flusher's rounds ended."""
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


async def test_wait_idle_for_a_flush_requested_during_a_crashing_flush_waits_for_it(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2.21, R7.2: an injection made while the flusher's flush is in flight is owed the
    next flush; that flush crashing ends only its own round, so ``wait_idle`` returns
    once the restarted flusher has made the second injection durable."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    store = MemoryStore()
    async with runtime(model, store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        crash_flusher(monkeypatch, times=1, after=5)
        agent.inject("first")
        await trio.sleep(1)
        agent.inject("second")
        await agent.wait_idle()
        assert store.statistics().committed_events == len(agent.session.events)
        injected = [texts(e.data.content) for e in of_type(agent.session.events, "context/message")]
        assert injected == ["first", "second"]


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
    """R2.21, R12.9, R12.10: cancelled with its runtime while its flusher waits out a restart pause,
    the agent's flusher never runs again: a ``wait_idle`` (in a task outside the runtime) waiting
    for the flush it owed returns with the teardown, whose final flush stores the injection, rather
    than waiting forever on a round no flusher would serve."""
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
