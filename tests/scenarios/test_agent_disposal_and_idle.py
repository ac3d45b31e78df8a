"""The agent handle's disposal, idle waiting and status (SPEC 2; T-A7..T-A9)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from retinue.tools import ToolContext
from tests.helpers import (
    OPTIONS,
    echo,
    of_type,
    record_statuses,
    runtime,
    turn_ends,
)


async def test_dispose_is_idempotent(autojump_clock: trio.testing.MockClock) -> None:
    """T-A7 / R2.35, R12.8: concurrent and repeated disposals emit ``disposed`` and ``agent/disposed`` once."""
    model = ScriptedModel([Hang()])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        disposed: list[str] = []
        rt.hooks.on("agent/disposed", lambda a: disposed.append(a.id), agent=agent)
        agent.send("go")
        await trio.sleep(1)
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(agent.dispose)
        await agent.dispose()
        assert statuses == ["running", "disposed"]
        assert disposed == [agent.id]
        assert turn_ends(agent.session.events) == ["disposed"]
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize("verb", ["wait_idle", "ask"])
async def test_an_agent_waiting_on_itself_from_its_own_tool_gets_a_typed_error(
    autojump_clock: trio.testing.MockClock, verb: str
) -> None:
    """Waiting on oneself is refused: ``wait_idle``/``ask`` from the agent's own tool would
    wait for itself forever; it raises ``WAITS_FOR_ITSELF``, which the call reports, and
    the turn goes on.
    """

    async def wait_for_me(ctx: ToolContext) -> str:
        """Wait for the calling agent."""
        agent = ctx.agent
        assert isinstance(agent, retinue.Agent)
        await (agent.wait_idle() if verb == "wait_idle" else agent.ask("again"))
        return "never"

    model = ScriptedModel([CallTools([ToolCallSpec("wait_for_me", "{}", id="w")]), Reply("done")])
    async with runtime(model, tools=[retinue.tool(wait_for_me)]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        (tool_result,) = of_type(agent.session.events, "tool/result")
        assert tool_result.data.error is not None  # type: ignore[union-attr]
        assert tool_result.data.error.code == "WAITS_FOR_ITSELF"  # type: ignore[union-attr]
        assert len(of_type(agent.session.events, "turn/start")) == 1


async def test_a_flush_listener_waiting_on_its_agent_during_disposal_gets_a_typed_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: the final flush of a disposal runs the agent's ``session/flush``
    listeners under its driver; a ``wait_idle`` there would wait for its own teardown,
    so it raises ``WAITS_FOR_ITSELF`` and ``dispose`` does not stall.
    """
    codes: list[str | None] = []
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), flush_timeout=30) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def on_flush(flushed: retinue.Agent, _session: object) -> None:
            try:
                await flushed.wait_idle()
                codes.append(None)
            except retinue.AgentError as exc:
                codes.append(exc.code)

        rt.hooks.on("session/flush", on_flush, agent=agent)
        await agent.ask("hi")
        started = trio.current_time()
        await agent.dispose()
        assert trio.current_time() - started < 1, "dispose waited out the flush timeout"
    assert codes[-1] == "WAITS_FOR_ITSELF"


async def test_disposal_flush_listeners_waiting_on_each_other_get_a_typed_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: two agents disposed together whose ``session/flush`` listeners each
    ``wait_idle`` on the other would wait in a circle; one gets ``WAIT_CYCLE``, so
    leaving the runtime does not wait out the flush timeout.
    """
    heard: list[tuple[str, str]] = []
    with trio.fail_after(100):
        async with retinue.open_runtime(
            models=ScriptedModel([Reply("ok")], repeat_last=True), flush_timeout=30
        ) as rt:
            first = await rt.create_agent("a", OPTIONS)
            second = await rt.create_agent("b", OPTIONS)

            async def on_flush(flushed: retinue.Agent, _session: object) -> None:
                if flushed.status != "disposed":
                    return
                other = second if flushed is first else first
                try:
                    await other.wait_idle()
                    heard.append((flushed.id, "returned"))
                except retinue.AgentError as exc:
                    heard.append((flushed.id, str(exc.code)))

            rt.hooks.on("session/flush", on_flush)
            await first.ask("hi")
            await second.ask("hi")
            started = trio.current_time()
    assert trio.current_time() - started < 1, "the runtime waited out the flush timeout"
    assert sorted(code for _, code in heard) == ["WAIT_CYCLE", "returned"]


@pytest.mark.timeout(30)  # a regression deadlocks inside a shielded wait, out of the clock's reach
@pytest.mark.parametrize("where", ["tool", "listener"])
async def test_an_agent_disposing_itself_from_its_own_turn_does_not_deadlock(
    autojump_clock: trio.testing.MockClock, where: str
) -> None:
    """R2.35, R2.36, R12.9: ``await agent.dispose()`` from the agent's own tool or listener.

    The call cannot wait for the driver it runs under: it stops the agent and
    returns; the turn ends ``disposed``, is flushed, and the agent is torn down.
    """
    returned: list[str] = []

    async def stop_me(ctx: ToolContext) -> str:
        """Dispose the calling agent."""
        await ctx.agent.dispose()
        returned.append("tool")
        return "stopped"

    model = ScriptedModel([CallTools([ToolCallSpec("stop_me", "{}", id="s")]), Reply("never")])
    store = MemoryStore()
    async with runtime(model, tools=[retinue.tool(stop_me)], store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        disposed: list[str] = []
        rt.hooks.on("agent/disposed", lambda a: disposed.append(a.id), agent=agent)
        if where == "listener":

            async def pre_step(*_args: object) -> None:
                await agent.dispose()
                returned.append("listener")

            rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        result = await agent.ask("go")
        await agent.dispose()
        assert result.reason.kind == "disposed"
        assert returned == [where]
        assert disposed == [agent.id]
        assert agent.status == "disposed"
        assert len(rt.agents) == 0
        assert store.statistics().buffered_events == 0
        check_session_invariants(agent.session.events)


async def test_status_changes_emit_only_real_transitions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A7 / R2.3, R7.1: no duplicate status events; back-to-back turns stay ``running``;
    a transition out of ``disposed`` is refused and never announced.
    """
    model = ScriptedModel([Reply("one", delay=5), Reply("two"), Reply("three")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        announced: list[tuple[str, str]] = []
        rt.hooks.on("agent/status", lambda who, status: announced.append((who.id, status)))
        agent.send("first")
        await trio.sleep(1)
        assert agent.status == "running"
        agent.send("queued behind the first")
        await agent.wait_idle()
        assert turn_ends(agent.session.events) == ["completed", "completed"]
        assert statuses == ["running", "idle"]
        await agent.ask("third")
        assert statuses == ["running", "idle", "running", "idle"]
        await agent.dispose()
        assert statuses[-1] == "disposed"
        # No public verb moves a disposed agent, so drive the status setter itself, as a
        # driver racing the disposal would: it must not leave ``disposed`` or announce.
        after: list[str] = []
        for status in ("idle", "running", "idle"):
            agent._core.set_status(status)
            after.append(agent.status)
        assert after == ["disposed", "disposed", "disposed"]
        expected = ["running", "idle", "running", "idle", "disposed"]
        assert announced == [(agent.id, status) for status in expected]
        assert statuses == expected


async def test_wait_idle_returns_at_once_when_idle(autojump_clock: trio.testing.MockClock) -> None:
    """T-A8 / R2.31: wait_idle on an idle agent with nothing queued returns immediately (a checkpoint)."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        start = trio.current_time()
        with trio.testing.assert_checkpoints():
            await agent.wait_idle()
        assert trio.current_time() == start
        assert list(agent.session.events) == []


async def test_wait_idle_waits_for_queued_work(autojump_clock: trio.testing.MockClock) -> None:
    """T-A8 / R2.32, R7.2: a send not yet picked up is waited for, including its flush."""
    model = ScriptedModel([Reply("ok", delay=3)])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        flushed: list[int] = []
        rt.hooks.on(
            "session/flush", lambda _a, session: flushed.append(len(session.events)), agent=agent
        )
        agent.send("hi")
        assert agent.status == "idle"
        await agent.wait_idle()
        assert agent.status == "idle"
        assert turn_ends(agent.session.events) == ["completed"]
        assert flushed == [len(agent.session.events)]


async def test_wait_idle_ignores_other_agents(autojump_clock: trio.testing.MockClock) -> None:
    """T-A8 / R2.32: another agent going idle does not release this agent's waiter."""
    model = ScriptedModel({"slow": [Hang()], "fast": [Reply("done")]})
    async with runtime(model) as rt:
        slow = await rt.create_agent("slow", AgentOptions(model="slow"))
        fast = await rt.create_agent("fast", AgentOptions(model="fast"))
        released = trio.Event()

        async def wait_slow() -> None:
            await slow.wait_idle()
            released.set()

        slow.send("hang")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_slow)
            await fast.ask("quick")
            await trio.sleep(10)
            assert not released.is_set()
            slow.cancel()
            await released.wait()
        assert turn_ends(slow.session.events) == ["aborted"]


async def test_wait_idle_released_by_disposal_after_driver_exit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A8 / R2.30, R2.32: disposal releases waiters only once the driver exited and the turn closed."""
    model = ScriptedModel([Hang()])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("hang")
        observed: list[list[str]] = []

        async def waiter() -> None:
            await agent.wait_idle()
            observed.append(turn_ends(agent.session.events))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.sleep(1)
            await agent.dispose()
        assert observed == [["disposed"]]
        start = trio.current_time()
        await agent.wait_idle()
        assert trio.current_time() == start


async def test_raising_status_listeners_are_contained(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A9 / R2.33, R6.1: raising ``agent/status`` listeners change nothing; later listeners
    still run; a ``wait_idle`` waiter is already released when they hear the agent go idle.
    """
    model = ScriptedModel([Reply("one"), Reply("two", delay=5)])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        waiters: list[trio.Event] = []
        released_when_heard: list[tuple[str, list[bool]]] = []

        def raising(_agent: retinue.Agent, status: str) -> None:
            raise RuntimeError(f"listener broke on {status}")

        def check_waiters(_agent: retinue.Agent, status: str) -> None:
            released_when_heard.append((status, [waiter.is_set() for waiter in waiters]))

        rt.hooks.on("agent/status", raising, agent=agent)
        rt.hooks.on("agent/status", check_waiters, agent=agent)
        seen = record_statuses(rt, agent)
        first = await agent.ask("one")
        agent.send("two")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)  # the second turn is under way: its model replies at 5 s
            waiters.extend(agent._core.idle_waiters)  # the one the waiting task registered
            assert [waiter.is_set() for waiter in waiters] == [False]
        assert released_when_heard == [
            ("running", []),
            ("idle", []),
            ("running", []),
            ("idle", [True]),
        ]
        assert first.reason.kind == "completed"
        assert turn_ends(agent.session.events) == ["completed", "completed"]
        assert seen == ["running", "idle", "running", "idle"]
        assert agent.status == "idle"
        check_session_invariants(agent.session.events)


async def test_session_event_listeners_added_and_removed_later_hear_exactly_their_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``session/event`` reaches listeners registered after creation, and only while registered (R6.2)."""
    async with runtime(ScriptedModel([Reply(text) for text in ("a", "b", "c", "d")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("first")
        heard: list[int] = []
        scoped: list[int] = []
        unregister = rt.hooks.on("session/event", lambda _session, event: heard.append(event.seq))
        start = len(agent.session.events)
        await agent.ask("second")
        end = len(agent.session.events)
        unregister()
        await agent.ask("third")
        rt.hooks.on("session/event", lambda _s, event: scoped.append(event.seq), agent=agent)
        third_end = len(agent.session.events)
        await agent.ask("fourth")
        assert heard == list(range(start, end))
        assert scoped == list(range(third_end, len(agent.session.events)))


async def test_nothing_can_be_scoped_to_a_disposed_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.5, R2.37: a listener or tool scoped to a disposed handle is refused: it would
    outlive the teardown and be heard by a later agent resumed under the same id.
    """
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("first")
        await agent.dispose()
        with pytest.raises(retinue.AgentDisposedError):
            rt.hooks.on("agent/status", lambda _agent, _status: None, agent=agent)
        with pytest.raises(retinue.AgentDisposedError):
            rt.tools.add(echo, agent=agent)
        resumed = await rt.resume_agent(agent.id, OPTIONS)
        await resumed.ask("hello")
        assert not rt.hooks.has_listeners("agent/status")
