"""Edges of the runtime and the agent handle: a final flush that fails, cancelled waits,
disposal during a setup, scoping to a torn-down agent, closed subscriptions
(SPEC R2.32, R4.10, R11.15, R12.5, R12.6, R12.9)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentDisposedError, StoreError
from retinue.session import Event
from retinue.stores import StoreTimeoutError
from retinue.stores._memory import MemoryBackend
from retinue.stores._writebehind import BufferedStore
from retinue.testing import (
    CallTools,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, runtime, types
from tests.stores._kit import OutageBackend


async def test_resume_after_a_failed_final_flush_commits_what_the_old_agent_left_buffered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9, R11.15: a final flush that fails leaves the closing events buffered, not the id
    stuck: a resume while the store still fails raises its error, and once the store works
    again the resume first commits those events, then loads a log that lost none of them.
    """
    backend = OutageBackend()
    store = BufferedStore(backend, name="outage")  # type: ignore[arg-type]
    model = ScriptedModel([Reply("one")], repeat_last=True)
    async with runtime(model, store=store) as rt:
        agent = await rt.create_agent("w", OPTIONS)
        await agent.ask("hello")
        agent.inject("note")  # an idle injection turn, flushed on its own (R11.18)
        backend.down = True
        await agent.dispose()
        assert agent.status == "disposed"
        old_events = list(agent.session.events)
        assert store.statistics().buffered_events > 0, "the outage lost nothing yet"
        with pytest.raises(StoreError) as still_down:
            await rt.resume_agent(agent.id, OPTIONS)
        assert still_down.value.code != "SESSION_TRACKED"
        assert "No space left" in str(still_down.value)
        backend.down = False
        again = await rt.resume_agent(agent.id, OPTIONS)
        assert store.statistics().buffered_events == 0
        assert list(again.session.events)[: len(old_events)] == old_events
        assert (await again.ask("again")).turn == 3
        check_session_invariants(again.session.events)


async def test_a_failed_final_flush_is_tried_again_as_the_runtime_closes(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.9, R11.15: a session whose final flush failed is flushed and let go once more
    when its runtime closes, as no resume of it can come in that runtime any more: in a
    store shared by runtimes its buffered events are committed then, not left for the next
    runtime's resume to take over."""
    backend = OutageBackend()
    store = BufferedStore(backend, name="outage")  # type: ignore[arg-type]
    model = ScriptedModel([Reply("one")], repeat_last=True)
    async with store:
        async with runtime(model, store=store) as rt:
            agent = await rt.create_agent("w", OPTIONS)
            await agent.ask("hello")
            agent.inject("note")
            backend.down = True
            await agent.dispose()
            old_events = list(agent.session.events)
            assert store.statistics().buffered_events > 0, "the outage lost nothing yet"
            backend.down = False
        assert store.statistics().tracked_sessions == 0
        async with runtime(model, store=store) as rt:
            again = await rt.resume_agent(agent.id, OPTIONS)
            assert list(again.session.events)[: len(old_events)] == old_events
            assert (await again.ask("again")).turn == 3
    assert sum("final flush of session" in message for message in caplog.messages) == 1


async def test_a_final_flush_failing_again_as_the_runtime_closes_is_logged(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.9, R11.6: a final flush that fails again as its runtime closes is logged, naming
    the session; its events stay buffered for the store's close, which reports them."""
    backend = OutageBackend()
    store = BufferedStore(backend, name="outage")  # type: ignore[arg-type]
    model = ScriptedModel([Reply("one")], repeat_last=True)
    agents: list[retinue.Agent] = []

    async def run() -> None:
        async with runtime(model, store=store) as rt:
            agents.append(await rt.create_agent("w", OPTIONS))
            await agents[0].ask("hello")
            agents[0].inject("note")
            backend.down = True
            await agents[0].dispose()

    with pytest.raises(StoreError) as caught:
        await run()
    assert caught.value.code == "CLOSE_FAILED"
    agent_id = agents[0].id
    expected = (
        f"the final flush of a disposed agent (session {agent_id}) failed again as the runtime "
        "closed: session "
        f"{agent_id!r}: the write failed: the store's write failed: OSError: [Errno 28] No "
        "space left on device; the session stays released with its unflushed events buffered "
        "in the store, for the next load of the id to take over or the store's close"
    )
    assert [r.message for r in caplog.records if "as the runtime closed" in r.message] == [expected]


class _HangingDetach(BufferedStore):
    """A memory store whose final flush (``detach``) hangs while ``hang`` is set."""

    hang = False

    async def detach(self, session: Any) -> None:
        if self.hang:
            await trio.sleep_forever()
        await super().detach(session)


async def test_a_resume_behind_a_hanging_final_flush_fails_within_flush_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: the retried final flush of a stranded session is bounded like the teardown's:
    a create or resume of the id fails after ``flush_timeout`` instead of waiting forever, with a
    ``StoreTimeoutError`` coded ``DETACH_TIMEOUT`` (a ``TimeoutError`` too) caused by the
    detach's own, and succeeds once the store answers again."""
    store = _HangingDetach(MemoryBackend(), name="hanging")
    model = ScriptedModel([Reply("one")], repeat_last=True)
    async with runtime(model, store=store, flush_timeout=5.0) as rt:
        agent = await rt.create_agent("w", OPTIONS)
        await agent.ask("hello")
        store.hang = True
        await agent.dispose()
        for attempt in (
            rt.resume_agent(agent.id, OPTIONS),
            rt.create_agent("w", OPTIONS, session_id=agent.id),
        ):
            started = trio.current_time()
            with pytest.raises(StoreTimeoutError) as caught:
                await attempt
            assert trio.current_time() - started == 5
            assert caught.value.code == "DETACH_TIMEOUT"
            cause = caught.value.__cause__
            assert isinstance(cause, StoreTimeoutError)
            assert (cause.code, cause.message) == (
                "DETACH_TIMEOUT",
                "the store did not answer within 5s",
            )
        store.hang = False
        again = await rt.resume_agent(agent.id, OPTIONS)
        assert (await again.ask("again")).turn == 2


async def test_cancelled_wait_idle_calls_leave_no_waiter_behind(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.32: ``wait_idle`` cancelled while a long turn runs leaves nothing behind, however
    often it is polled; a wait that is not cancelled still returns when the turn ends.

    The agent offers no public count of its idle waiters: this test reads the private
    list, the only place the leak shows.
    """
    async with runtime(ScriptedModel([Hang(), Reply("done")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("long job")
        for _ in range(100):
            with trio.move_on_after(1):
                await agent.wait_idle()
        assert agent.session.is_turn_open, "the long turn still runs"
        assert agent._core.idle_waiters == []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)
            agent.cancel()
        assert agent.status == "idle"
        assert agent._core.idle_waiters == []


@pytest.mark.parametrize("disposer", ["another task", "the setup itself"])
async def test_an_agent_disposed_during_its_setup_announces_nothing(
    autojump_clock: trio.testing.MockClock, disposer: str
) -> None:
    """R12.5, R12.6: an agent disposed during its setup was never published, so its end is
    not announced either: no ``agent/status("disposed")`` for an agent nobody heard of.
    """
    heard: list[str] = []
    handles: list[retinue.Agent] = []

    async def setup(agent: retinue.Agent) -> None:
        handles.append(agent)
        rt.hooks.on("agent/status", lambda _a, status: heard.append(f"own {status}"), agent=agent)
        if disposer == "the setup itself":
            await agent.dispose()
        await trio.sleep(10)

    async def dispose_soon() -> None:
        await trio.sleep(1)
        await handles[0].dispose()

    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        for name in ("session/created", "agent/created", "agent/status", "agent/disposed"):
            rt.hooks.on(name, lambda *_args, name=name: heard.append(name))
        async with trio.open_nursery() as nursery:
            if disposer == "another task":
                nursery.start_soon(dispose_soon)
            with pytest.raises(AgentDisposedError, match="disposed during its setup"):
                await rt.create_agent("a", OPTIONS, setup=setup)
        assert handles[0].status == "disposed"
        assert len(rt.agents) == 0
        assert heard == []
        await handles[0].dispose()  # memoized: returns, still announcing nothing
        assert heard == []


async def test_scoping_a_cleanup_to_a_torn_down_agent_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9, R6.5: like a listener or tool scoped to a disposed agent, a cleanup scoped
    to one is refused with ``AgentDisposedError`` rather than dropped silently.
    """
    called: list[str] = []
    async with runtime(ScriptedModel([Reply("a")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="a")
        await agent.ask("hi")
        await agent.dispose()
        with pytest.raises(AgentDisposedError):
            rt.hooks.on("agent/status", lambda *_: None, agent=agent)
        with pytest.raises(AgentDisposedError):
            rt.scoped(agent, lambda: called.append("cleanup"))
        again = await rt.resume_agent("a", OPTIONS)
        rt.scoped(again, lambda: called.append("live cleanup"))
        await again.dispose()
    assert called == ["live cleanup"]


async def test_a_scoped_cleanup_run_early_is_run_once_and_let_go(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: ``scoped`` returns a function that runs the cleanup now; the runtime then holds it no
    more, so per-turn listeners scoped to a long-lived agent are not each kept, with what they hold,
    until its teardown, however often their callers remove them."""
    called: list[int] = []
    async with runtime(ScriptedModel([Reply("a")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        for number in range(100):
            listener = rt.hooks.on("agent/status", lambda *_: None, agent=agent)

            def cleanup(number: int = number, listener: Callable[[], None] = listener) -> None:
                listener()
                called.append(number)

            remove = rt.scoped(agent, cleanup)
            remove()
            remove()
        held: Any = rt._cleanups  # what the runtime keeps for the agent
        assert len(held[agent.id]) == 2  # its own session relay's
        assert not rt.hooks.has_listeners("agent/status")
        rt.scoped(agent, lambda: called.append(-1))
        await agent.dispose()
    assert called == [*range(100), -1]


async def test_scoped_cleanups_run_once_whoever_runs_them_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a cleanup that runs another early during teardown, and one run early after it, each
    run once: the teardown does not fail on the first, nor run the second twice."""
    called: list[str] = []
    async with runtime(ScriptedModel([Reply("a")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        remove_first = rt.scoped(agent, lambda: called.append("first"))

        def second() -> None:
            called.append("second")
            remove_first()

        rt.scoped(agent, second)
        remove_last = rt.scoped(agent, lambda: called.append("last"))
        await agent.dispose()
        remove_last()
        remove_first()
    assert called == ["last", "second", "first"]


async def test_closing_a_subscription_ends_iteration_at_its_next_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.10: after ``close()`` iteration ends at its next step, even though events logged
    before the close were never read; a feed half read ends just the same.
    """
    async with runtime(ScriptedModel([Reply("hello world", chunks=8)], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        unread = agent.subscribe()
        half_read = agent.subscribe()
        await agent.ask("x")
        assert len(agent.session.events) > 2
        unread.close()
        assert [event async for event in unread] == []
        first: Event = await half_read.__anext__()
        assert first.type == "turn/start"
        half_read.close()
        with pytest.raises(StopAsyncIteration):
            await half_read.__anext__()
        later: list[Any] = []
        async with agent.subscribe() as events:
            await agent.ask("y")
            events.close()
            later.extend([event async for event in events])
        assert types(later) == []


@pytest.mark.parametrize("seam", ["session/created", "agent/created", "agent/session-start"])
async def test_a_base_exception_from_a_publication_listener_leaves_no_agent_behind(
    autojump_clock: trio.testing.MockClock, seam: str
) -> None:
    """R12.5, R12.10: Ctrl-C in a listener of a publication announcement reaches
    the creator; the agent, which no driver will run, is torn down (out of the registry
    and the store, its id free again), and the runtime still closes."""
    with trio.fail_after(60):
        async with runtime(ScriptedModel([Reply("again")])) as rt:

            def interrupt(*_args: object) -> None:
                raise KeyboardInterrupt

            unregister = rt.hooks.on(seam, interrupt)  # type: ignore[call-overload]
            with pytest.raises(KeyboardInterrupt):
                await rt.create_agent("a", OPTIONS, session_id="s")
            unregister()
            await trio.sleep(1)
            assert rt.agents.get("s") is None
            assert not await rt.store.exists("s")
            again = await rt.create_agent("a", OPTIONS, session_id="s")
            assert (await again.ask("hi")).reason.kind == "completed"


async def test_disposing_an_agent_from_a_tool_counts_as_waiting_on_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a tool of B that disposes A waits for A's teardown, as ``wait_idle`` would;
    a listener of A's final flush that waits on B would close a circle, and is refused
    with ``WAIT_CYCLE`` instead of waiting for ever."""
    handles: dict[str, retinue.Agent] = {}

    @retinue.tool
    async def dispose_a() -> str:
        """Dispose agent A."""
        await handles["A"].dispose()
        return "disposed"

    model = ScriptedModel(
        {"a": [Reply("a")], "b": [CallTools([ToolCallSpec("dispose_a", "{}")]), Reply("done")]}
    )
    seen: list[str] = []
    with trio.fail_after(60):
        async with runtime(model, tools=[dispose_a], flush_timeout=math.inf) as rt:
            handles["A"] = await rt.create_agent("A", retinue.AgentOptions(model="a"))
            b = await rt.create_agent("B", retinue.AgentOptions(model="b"))

            async def wait_for_b(_agent: retinue.Agent, _session: object) -> None:
                try:
                    await b.wait_idle()
                    seen.append("waited")
                except retinue.AgentError as error:
                    seen.append(str(error.code))

            rt.hooks.on("session/flush", wait_for_b, agent=handles["A"])
            assert (await b.ask("dispose A")).reason.kind == "completed"
    assert seen == ["WAIT_CYCLE"]
