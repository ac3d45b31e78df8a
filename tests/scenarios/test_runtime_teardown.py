"""Agent teardown owned by the runtime: disposal, a setup it aborts, scoped cleanups,
listeners that interrupt it, and waits its own agent makes on it
(SPEC R2.35, R12.4, R12.6, R12.8, R12.9, R12.10)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.session import Session, UserMessage
from retinue.stores import MemoryStore
from retinue.testing import CallTools, DelegatingStore, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, raises_ctrl_c, runtime, texts, turn_ends
from tests.scenarios._runtime_teardown_kit import SlowDetach


async def test_a_cancelled_dispose_stops_waiting_and_the_teardown_still_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R12.9, R12.10: cancelling a ``dispose`` caller ends its wait, not the
    teardown; a later ``dispose`` waits for the same teardown, and so does shutdown.
    """
    store = SlowDetach()
    gone: list[str] = []
    with trio.fail_after(600):
        async with retinue.open_runtime(models=ScriptedModel([Reply("hi")]), store=store) as rt:
            rt.hooks.on("agent/disposed", lambda agent: gone.append(agent.id))
            agent = await rt.create_agent("a", OPTIONS)
            await agent.ask("hello")
            with trio.move_on_after(0.5) as waited:
                await agent.dispose()
            assert waited.cancelled_caught, "dispose returned before the detach finished"
            assert store.detached == []
            await agent.dispose()
            assert store.detached == [agent.id]
            other = await rt.create_agent("b", OPTIONS)
            with trio.move_on_after(0.5):
                await other.dispose()
        assert store.detached == [agent.id, other.id], "shutdown did not wait for a teardown"
    assert gone == [agent.id, other.id]


async def test_disposing_an_agent_during_its_setup_aborts_the_setup(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.4, R12.8: disposing a handle whose setup is still awaiting aborts that setup and
    waits for the creation to roll back: its scoped listener is gone when ``dispose``
    returns, and ``create_agent`` raises ``AgentDisposedError``.
    """
    handles: list[retinue.Agent] = []
    outcome: list[Any] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:

        async def setup(agent: retinue.Agent) -> None:
            rt.hooks.on("agent/status", lambda *_: None, agent=agent)
            handles.append(agent)
            await trio.sleep(1000)

        async def create() -> None:
            try:
                outcome.append(await rt.create_agent("a", OPTIONS, setup=setup))
            except retinue.AgentDisposedError as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create)
            await trio.sleep(1)
            await handles[0].dispose()
            assert trio.current_time() < 2, "dispose waited for the whole setup"
            assert not rt.hooks.has_listeners("agent/status")
            assert len(outcome) == 1, "dispose returned before the creation unwound"
        assert isinstance(outcome[0], retinue.AgentDisposedError)
        assert handles[0].status == "disposed"
        assert len(rt.agents) == 0


async def test_resuming_an_agent_as_it_is_reported_disposed_waits_for_its_detach(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: the id stays reserved until the final detach: a ``resume_agent`` made when
    ``agent/disposed`` fires (before the session is detached) waits for it and succeeds.
    """
    gone = trio.Event()
    outcome: list[Any] = []
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True), store=SlowDetach()) as rt:
        rt.hooks.on("agent/disposed", lambda _agent: gone.set())
        old = await rt.create_agent("a", OPTIONS)
        await old.ask("hello")

        async def revive() -> None:
            await gone.wait()
            assert rt.agents.get(old.id) is None
            try:
                outcome.append(await rt.resume_agent(old.id, OPTIONS))
            except retinue.RetinueError as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(revive)
            await old.dispose()
        (revived,) = outcome
        assert isinstance(revived, retinue.Agent), revived
        assert (await revived.ask("again")).turn == 2


async def test_a_synchronous_setup_may_return_a_value(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.6: what a synchronous setup returns (here the unregister function of a scoped
    listener) is ignored; only an awaitable is awaited.
    """
    statuses: list[str] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        agent = await rt.create_agent(
            "a",
            OPTIONS,
            setup=lambda a: rt.hooks.on("agent/status", lambda _a, s: statuses.append(s), agent=a),
        )
        assert (await agent.ask("x")).reason.kind == "completed"
    assert statuses[-1] == "disposed"


@retinue.tool
async def dismiss_x() -> str:
    """Dispose agent x, whose setup started this tool's agent."""
    await _SETUP_HANDLES["x"].dispose()
    return "dismissed"


_SETUP_HANDLES: dict[str, retinue.Agent] = {}


async def test_an_agent_started_by_a_setup_may_dispose_the_agent_being_set_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.4, R12.8: an agent created inside x's setup is no part of that setup: its tool's
    ``x.dispose()`` aborts the setup and waits for the creation to unwind, as any caller's does.
    """
    _SETUP_HANDLES.clear()
    model = ScriptedModel({"y": [CallTools([ToolCallSpec("dismiss_x")]), Reply("done")]})
    outcome: list[Any] = []
    async with runtime(model, tools=[dismiss_x]) as rt:

        async def setup_x(x: retinue.Agent) -> None:
            _SETUP_HANDLES["x"] = x
            _SETUP_HANDLES["y"] = await rt.create_agent("y", retinue.AgentOptions(model="y"))
            await trio.sleep(1000)

        async def create_x() -> None:
            try:
                await rt.create_agent("x", retinue.AgentOptions(model="x"), setup=setup_x)
            except retinue.AgentDisposedError as exc:
                outcome.append((trio.current_time(), exc))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create_x)
            await trio.sleep(1)
            result = await _SETUP_HANDLES["y"].ask("dismiss x")
            assert result.reason.kind == "completed"
            assert _SETUP_HANDLES["x"].status == "disposed"
            assert outcome, "x.dispose() returned before x's creation unwound"
    assert outcome[0][0] < 2, "x's setup ran to its end"


async def test_the_handle_of_a_failed_setup_reads_disposed_and_takes_no_listener(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.6: a creation whose setup failed publishes nothing; a handle the setup kept is
    ``disposed``, so nothing can be scoped to it and heard by a later agent of that id.
    """
    kept: list[retinue.Agent] = []
    statuses: list[str] = []
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        rt.hooks.on("agent/status", lambda agent, status: statuses.append(f"{agent.id} {status}"))

        def failing_setup(agent: retinue.Agent) -> None:
            kept.append(agent)
            raise RuntimeError("setup failed")

        with pytest.raises(RuntimeError, match="setup failed"):
            await rt.create_agent("a", OPTIONS, session_id="a", setup=failing_setup)
        assert kept[0].status == "disposed"
        with pytest.raises(retinue.AgentDisposedError):
            rt.hooks.on("agent/status", lambda *_: None, agent=kept[0])
        await kept[0].dispose()  # a no-op that returns
        again = await rt.create_agent("a", OPTIONS, session_id="a")
        assert (await again.ask("hi")).reason.kind == "completed"
    assert "a disposed" not in statuses[: statuses.index("a running")]


async def test_scoped_refuses_a_cleanup_that_is_not_callable(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.9: ``rt.scoped`` takes a function the teardown calls; anything else is a TypeError naming
    it, when scoped, not taken to fail only at the teardown, as a logged "cleanup failed" naming no
    call."""
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        with pytest.raises(TypeError, match=r"^unregister must be a callable, got 'close'$"):
            rt.scoped(agent, "close")  # type: ignore[arg-type]
        await agent.dispose()
    assert "cleanup of agent" not in caplog.text


@pytest.mark.parametrize("agent", ["a", None], ids=["id", "None"])
async def test_scoped_refuses_what_is_no_agent_handle(
    autojump_clock: trio.testing.MockClock, agent: object
) -> None:
    """R12.9: ``rt.scoped`` ties a cleanup to the teardown of an agent handle; an agent's id, or
    anything else, is a TypeError naming it, not a bare AttributeError, and the cleanup is not
    held."""
    called: list[str] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        live = await rt.create_agent("a", OPTIONS, session_id="a")
        refused = rf"^agent must be an Agent \(from create_agent\), got {agent!r}$"
        with pytest.raises(TypeError, match=refused):
            rt.scoped(agent, lambda: called.append("cleanup"))  # type: ignore[arg-type]
        await live.dispose()
    assert called == []


async def test_scoped_refuses_another_runtimes_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a cleanup is tied to the teardown of one of the runtime's own agents; another
    runtime's agent is a ValueError naming it, and the cleanup is not held: held, it would never
    run, since that agent's teardown unwinds its own runtime's cleanups, and a later agent of the
    same id in this runtime would drop it unrun."""
    called: list[str] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt, runtime(ScriptedModel([])) as other:
        theirs = await other.create_agent("a", OPTIONS, session_id="a")
        with pytest.raises(ValueError, match=r"^agent 'a' belongs to another runtime$"):
            rt.scoped(theirs, lambda: called.append("cleanup"))
        await theirs.dispose()
        ours = await rt.create_agent("a", OPTIONS, session_id="a")
        await ours.dispose()
    assert called == []


async def test_a_status_listener_interrupting_a_dispose_still_leaves_it_torn_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R12.9: the teardown is started before ``agent/status`` announces the disposal; Ctrl-C
    in a listener reaches the first ``dispose`` and the teardown still runs: a second ``dispose``
    and ``wait_idle`` return, and the agent leaves the registry before the runtime's end."""
    disposed: list[str] = []
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hello")

        def interrupt(_agent: retinue.Agent, status: str) -> None:
            if status == "disposed" and not disposed:
                disposed.append("interrupted")
                raise KeyboardInterrupt

        rt.hooks.on("agent/status", interrupt, agent=agent)
        rt.hooks.on("agent/disposed", lambda _agent: disposed.append("agent/disposed"))
        with raises_ctrl_c():
            await agent.dispose()
        await agent.dispose()
        await agent.wait_idle()
        assert (agent.status, rt.agents.get("a"), disposed) == (
            "disposed",
            None,
            ["interrupted", "agent/disposed"],
        )


async def test_a_disposed_listener_interrupting_a_teardown_still_unwinds_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: Ctrl-C in an ``agent/disposed`` listener ends the runtime, and the teardown's later
    stages still run: scoped cleanups, the end of every subscription and the detach, so no
    subscriber waits for good."""
    store = SlowDetach()
    cleaned: list[str] = []
    ended: list[str] = []
    with trio.fail_after(600):
        async with trio.open_nursery() as outer:
            with raises_ctrl_c():
                async with retinue.open_runtime(
                    models=ScriptedModel([Reply("hi")]), store=store
                ) as rt:
                    agent = await rt.create_agent("a", OPTIONS, session_id="s")
                    await agent.ask("hello")
                    rt.scoped(agent, lambda: cleaned.append("cleanup"))
                    feed = agent.subscribe()

                    async def read() -> None:
                        async for _event in feed:
                            pass
                        ended.append("feed")

                    outer.start_soon(read)

                    def interrupt(_agent: retinue.Agent) -> None:
                        raise KeyboardInterrupt

                    rt.hooks.on("agent/disposed", interrupt)
                    await agent.dispose()
    assert (cleaned, ended, store.detached) == (["cleanup"], ["feed"], ["s"])


class _DetachWaitingOnAgent(DelegatingStore):
    """A memory store whose detach of a session first calls *verb* on its agent."""

    def __init__(self, verb: str) -> None:
        super().__init__(MemoryStore())
        self.verb = verb
        self.agents: dict[str, retinue.Agent] = {}
        self.heard: list[str] = []

    async def detach(self, session: Session) -> None:
        agent = self.agents[session.id]
        try:
            await (agent.dispose() if self.verb == "dispose" else agent.wait_idle())
            self.heard.append("returned")
        except retinue.AgentError as exc:
            self.heard.append(str(exc.code))
        await self.store.detach(session)


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
@pytest.mark.parametrize(
    ("verb", "heard"), [("dispose", "returned"), ("wait_idle", "WAITS_FOR_ITSELF")]
)
async def test_a_store_detach_waiting_on_its_agent_does_not_wait_for_its_own_teardown(
    autojump_clock: trio.testing.MockClock, verb: str, heard: str
) -> None:
    """R2.35, R12.9: the final detach runs in the agent's teardown; a ``dispose`` there returns, as
    from the agent's own turn, and a ``wait_idle`` raises ``WAITS_FOR_ITSELF``: either waiting for
    the teardown it runs in would, with no flush bound, never end.
    """
    store = _DetachWaitingOnAgent(verb)
    async with runtime(ScriptedModel([Reply("ok")]), store=store, flush_timeout=math.inf) as rt:
        agent = store.agents["a"] = await rt.create_agent("a", OPTIONS, session_id="a")
        await agent.ask("hi")
        await agent.dispose()
        assert store.heard == [heard]
        assert store.store.statistics().committed_events == len(agent.session.events)


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
async def test_shutdown_begun_from_a_flush_listener_does_not_wait_for_its_own_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: ``rt.aclose()`` from a ``session/flush`` listener begins the shutdown and returns
    rather than waiting for every teardown, its own agent's too, which waits for that flush: with no
    flush bound that wait would never end. The runtime's exit waits for them all.
    """
    closed: list[bool] = []
    async with runtime(ScriptedModel([Reply("ok")]), flush_timeout=math.inf) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def close_the_runtime(_agent: retinue.Agent, _session: Session) -> None:
            await rt.aclose()
            closed.append(rt.closing)

        rt.hooks.on("session/flush", close_the_runtime, agent=agent)
        assert (await agent.ask("hi")).reason.kind == "completed"
        assert closed == [True]
        await agent.wait_idle()
        assert len(rt.agents) == 0
    assert turn_ends(agent.session.events) == ["completed"]


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
async def test_resuming_an_agent_from_its_own_flush_listener_raises_instead_of_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a ``session/flush`` listener that disposes its agent and resumes it gets
    ``WAITS_FOR_ITSELF`` from the resume: waiting for the id to be free, which happens once the
    teardown ends, which waits for that flush, it would, with no flush bound, never end.
    """
    codes: list[str | None] = []
    async with runtime(ScriptedModel([Reply("ok")]), flush_timeout=math.inf) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def restart(flushed: retinue.Agent, _session: Session) -> None:
            await flushed.dispose()
            try:
                await rt.resume_agent(flushed.id)
            except retinue.AgentError as exc:
                codes.append(exc.code)

        rt.hooks.on("session/flush", restart, agent=agent)
        assert (await agent.ask("hi")).reason.kind == "completed"
        await agent.wait_idle()
        assert codes == ["WAITS_FOR_ITSELF"]
        again = await rt.resume_agent(agent.id)
        assert again.session.last_turn == 1


async def test_a_disposed_agent_stays_registered_until_its_final_flush_has_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: quiescence, the final flush included, strictly precedes the registry's removal:
    a ``session/flush`` listener of the last flush still finds the agent under its id."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi")
        found: list[retinue.Agent | None] = []

        async def look_up(_agent: retinue.Agent, _session: Session) -> None:
            await trio.sleep(1)
            found.append(rt.agents.get(agent.id))

        rt.hooks.on("session/flush", look_up, agent=agent)
        agent.inject("last words")
        await agent.dispose()
        assert found
        assert all(entry is agent for entry in found)
        assert rt.agents.get(agent.id) is None


async def test_leaving_the_runtime_drops_queued_prompts_and_wait_idle_runs_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: leaving the runtime disposes its agents without waiting for their work: the
    running turn ends ``disposed`` and prompts queued behind it are never logged; waiting
    for each agent to go idle first lets every prompt run."""
    for drain in (False, True):
        model = ScriptedModel([Reply("slow", delay=5)], repeat_last=True)
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            agent.send("one")
            await trio.sleep(1)
            agent.send("two")
            agent.send("three")
            if drain:
                await agent.wait_idle()
        events = agent.session.events
        prompts = [texts(e.data.content) for e in events if isinstance(e.data, UserMessage)]
        assert prompts == (["one", "two", "three"] if drain else ["one"])
        assert turn_ends(events) == (["completed", "completed"] if drain else ["disposed"])
