"""Agent teardown owned by the runtime: disposal, shutdown and the runtime's own exit
(SPEC R2.36, R12.4, R12.6, R12.8, R12.9, R12.10)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.loop import AgentCore
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, nap, runtime, turn_ends


class BodyError(Exception):
    """An error the body of ``async with open_runtime(...)`` raises."""


class _SlowDetach(DelegatingStore):
    """A memory store whose final detach takes a virtual second (a real commit takes time)."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.detached: list[str] = []

    async def detach(self, session: Session) -> None:
        await trio.sleep(1)
        await self.store.detach(session)
        self.detached.append(session.id)


def _dismisser(me: str, peers: dict[str, retinue.Agent], go: trio.Event) -> retinue.Tool:
    """A tool of agent *me* that disposes the other agent of *peers* once *go* is set."""

    @retinue.tool(name=f"dismiss_{me}")
    async def dismiss() -> str:
        """Dismiss the peer."""
        await go.wait()
        (other,) = [agent for name, agent in peers.items() if name != me]
        await other.dispose()
        return "dismissed"

    return dismiss


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
async def test_agents_whose_tools_dispose_each_other_are_both_torn_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R12.9: A's tool disposes B while B's tool disposes A. Each dispose stops the
    other agent, whose tool then stops waiting; both teardowns complete.
    """
    peers: dict[str, retinue.Agent] = {}
    go = trio.Event()
    model = ScriptedModel(
        {
            "a": [CallTools([ToolCallSpec("dismiss_a", "{}", id="ca")]), Reply("ok")],
            "b": [CallTools([ToolCallSpec("dismiss_b", "{}", id="cb")]), Reply("ok")],
        }
    )
    tools = [_dismisser("a", peers, go), _dismisser("b", peers, go)]
    async with runtime(model, tools=tools) as rt:
        for name in ("a", "b"):
            peers[name] = await rt.create_agent(name, retinue.AgentOptions(model=name))
            peers[name].send("go")
        await trio.sleep(1)
        go.set()
        with trio.move_on_after(60) as waited:
            for agent in peers.values():
                await agent.wait_idle()
        assert not waited.cancelled_caught, "the agents never finished disposing each other"
        assert len(rt.agents) == 0
    for agent in peers.values():
        assert turn_ends(agent.session.events) == ["disposed"]
        check_session_invariants(agent.session.events)


async def test_a_cancelled_dispose_stops_waiting_and_the_teardown_still_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R12.9, R12.10: cancelling a ``dispose`` caller ends its wait, not the
    teardown; a later ``dispose`` waits for the same teardown, and so does shutdown.
    """
    store = _SlowDetach()
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


async def test_an_error_from_the_runtime_body_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: the runtime's nursery is an implementation detail; an exception raised in
    the body of ``async with open_runtime(...)`` reaches ``except`` as itself, with its
    cause and context, once every agent has been disposed.
    """
    caught: BaseException | None = None
    agents: list[retinue.Agent] = []
    try:
        with trio.fail_after(600):
            async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])) as rt:
                agents.append(await rt.create_agent("a", OPTIONS))
                try:
                    raise KeyError("context")
                except KeyError:
                    raise BodyError("boom") from ValueError("cause")
    except BodyError as exc:
        caught = exc
    except BaseException as exc:  # reported by the assertion below
        caught = exc
    assert isinstance(caught, BodyError), f"got {type(caught).__name__}: {caught!r}"
    assert isinstance(caught.__cause__, ValueError)
    assert isinstance(caught.__context__, KeyError)
    assert agents[0].status == "disposed"


class BodyGroup(ExceptionGroup[Exception]):
    """A group subclass with no ``derive`` of its own: its copies are plain groups."""


@pytest.mark.parametrize("raised", ["group", "subclass", "nursery"])
async def test_a_group_from_the_runtime_body_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock, raised: str
) -> None:
    """R12.10: an exception group the body raises (its own, a subclass of it, or one of
    its nurseries') comes out as that group, not wrapped in the runtime nursery's group:
    the nursery hands back a copy of it, which was taken for another error."""
    leaf = BodyError("boom")
    caught: BaseException | None = None
    try:
        with trio.fail_after(600):
            async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])):
                if raised == "group":
                    raise ExceptionGroup("mine", [leaf])
                if raised == "subclass":
                    raise BodyGroup("mine", [leaf])
                async with trio.open_nursery():
                    raise leaf
    except BaseException as exc:  # reported by the assertions below
        caught = exc
    assert isinstance(caught, ExceptionGroup), f"got {type(caught).__name__}: {caught!r}"
    assert caught.exceptions == (leaf,), f"wrapped: {caught!r}"
    assert isinstance(caught, BodyGroup) == (raised == "subclass")


async def test_a_queued_ask_is_settled_disposed_when_the_runtime_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.36, R12.10: cancelling the scope around the runtime disposes its agents; an
    ``ask`` made from outside that scope, queued behind the open turn, gets ``disposed``.
    """
    ready = trio.Event()
    box: dict[str, retinue.Agent] = {}
    results: list[retinue.TurnResult] = []
    settled = trio.Event()
    service_scope = trio.CancelScope()

    async def service() -> None:
        with service_scope:
            async with retinue.open_runtime(models=ScriptedModel([Hang("thinking")])) as rt:
                box["a"] = await rt.create_agent("a", OPTIONS)
                ready.set()
                await trio.sleep_forever()

    async def ask() -> None:
        results.append(await box["a"].ask("second"))
        settled.set()

    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service)
            await ready.wait()
            box["a"].send("first")
            await trio.sleep(1)
            nursery.start_soon(ask)
            await trio.sleep(1)
            service_scope.cancel()
            with trio.move_on_after(60) as waited:
                await settled.wait()
            assert not waited.cancelled_caught, "the queued ask was never settled"
    assert [result.reason.kind for result in results] == ["disposed"]
    assert turn_ends(box["a"].session.events) == ["disposed"]


async def test_an_ask_queued_in_a_restart_pause_is_settled_when_the_runtime_is_cancelled(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2.36, R12.10, DESIGN 4: an ``ask`` kept queued across driver crashes gets ``disposed``
    when the scope around the runtime is cancelled during the restart pause.

    Breaks ``AgentCore.set_status("running")`` twice, so the second restart
    waits out a back-off pause with the prompt still queued (a crash keeps
    it for the next driver). No driver runs when the cancel lands: the
    teardown itself must answer the asker.
    """
    real = AgentCore.set_status
    crashes: list[int] = []

    def set_status(self: AgentCore, status: Any) -> None:
        if status == "running" and len(crashes) < 2:
            crashes.append(1)
            raise RuntimeError(f"set_status bug #{len(crashes)}")
        real(self, status)

    monkeypatch.setattr(AgentCore, "set_status", set_status)
    ready = trio.Event()
    box: dict[str, retinue.Agent] = {}
    results: list[retinue.TurnResult] = []
    settled = trio.Event()
    service_scope = trio.CancelScope()
    policy = retinue.RestartPolicy(max_restarts=5, backoff=20)

    async def service() -> None:
        with service_scope:
            async with retinue.open_runtime(
                models=ScriptedModel([Reply("late")]), restart=policy
            ) as rt:
                box["a"] = await rt.create_agent("a", OPTIONS)
                ready.set()
                await trio.sleep_forever()

    async def ask() -> None:
        results.append(await box["a"].ask("stuck"))
        settled.set()

    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service)
            await ready.wait()
            nursery.start_soon(ask)
            await trio.sleep(10)
            assert len(crashes) == 2
            assert not settled.is_set()
            service_scope.cancel()
            with trio.move_on_after(60) as waited:
                await settled.wait()
            assert not waited.cancelled_caught, "the queued ask was never settled"
    assert [result.reason.kind for result in results] == ["disposed"]
    assert list(box["a"].session.events) == []


async def test_open_turns_end_disposed_when_the_scope_around_the_runtime_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.36, R12.10: a cancellation from outside the runtime is its teardown; turns it
    interrupts (in a tool call, or waiting on the model) end ``disposed``, not ``aborted``.
    """
    model = ScriptedModel(
        {
            "tools": [CallTools([ToolCallSpec("nap", '{"seconds": 1000}', id="t1")])],
            "hang": [Hang("thinking")],
        }
    )
    agents: list[retinue.Agent] = []
    gone: list[str] = []
    with trio.fail_after(600), trio.move_on_after(10):
        async with retinue.open_runtime(models=model, tools=[nap]) as rt:
            rt.hooks.on("agent/disposed", lambda agent: gone.append(agent.id))
            for name in ("tools", "hang"):
                agents.append(await rt.create_agent(name, retinue.AgentOptions(model=name)))
                agents[-1].send("go")
            await trio.sleep_forever()
    for agent in agents:
        assert agent.status == "disposed"
        assert turn_ends(agent.session.events) == ["disposed"], agent.id
        check_session_invariants(agent.session.events)
    assert sorted(gone) == sorted(agent.id for agent in agents)


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
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True), store=_SlowDetach()) as rt:
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
    """R12.9: ``rt.scoped`` takes a function the teardown calls; anything else is a
    TypeError naming it, when scoped. It was taken, and failed only at the teardown, as
    a logged "cleanup failed" naming no call."""
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
    """R12.9: ``rt.scoped`` ties a cleanup to the teardown of an agent handle; an agent's
    id, or anything else, is a TypeError naming it, and the cleanup is not held. It was
    a bare AttributeError."""
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
    runtime's agent is a ValueError naming it, and the cleanup is not held. It was held
    and never run: that agent's teardown unwinds its own runtime's cleanups, and a later
    agent of the same id in this runtime dropped it unrun."""
    called: list[str] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt, runtime(ScriptedModel([])) as other:
        theirs = await other.create_agent("a", OPTIONS, session_id="a")
        with pytest.raises(ValueError, match=r"^agent 'a' belongs to another runtime$"):
            rt.scoped(theirs, lambda: called.append("cleanup"))
        await theirs.dispose()
        ours = await rt.create_agent("a", OPTIONS, session_id="a")
        await ours.dispose()
    assert called == []


class _HangingDetach(DelegatingStore):
    """A memory store whose final detach never returns (a store that hangs)."""

    async def detach(self, session: Session) -> None:
        await trio.sleep_forever()


@pytest.mark.timeout(30)  # a hang inside the teardown's shield is out of the virtual clock's reach
async def test_a_store_that_hangs_on_the_final_detach_cannot_keep_the_runtime_open(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9, R12.10: the final detach of a teardown is bounded by ``flush_timeout``, like
    every turn's flush, so leaving ``open_runtime`` ends even when the store hangs.
    """
    store = _HangingDetach(MemoryStore())
    with trio.fail_after(100):
        async with retinue.open_runtime(
            models=ScriptedModel([Reply("hi")]), store=store, flush_timeout=5
        ) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            await agent.ask("hello")
    assert trio.current_time() == pytest.approx(5, abs=0.5)
    assert agent.status == "disposed"


@pytest.mark.parametrize("bound", [0, -1.0, float("nan")])
async def test_open_runtime_refuses_a_flush_timeout_that_is_not_a_positive_number(
    bound: float,
) -> None:
    """R7.49, R12.9: ``flush_timeout`` bounds every flush and the final detach; zero, a
    negative number or NaN (which would silently mean no bound) is a ConfigError naming it.
    """
    with pytest.raises(retinue.ConfigError, match="flush_timeout must be a positive number"):
        async with retinue.open_runtime(models=ScriptedModel([]), flush_timeout=bound):
            pass  # pragma: no cover - refused before the body runs


async def test_a_status_listener_interrupting_a_dispose_still_leaves_it_torn_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R12.9: the teardown is started before ``agent/status`` announces the
    disposal; Ctrl-C in a listener reaches the first ``dispose`` and the teardown
    still runs. It used to be never started: a second ``dispose`` and ``wait_idle``
    hung, and the agent stayed in the registry past the runtime's end."""
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
        with pytest.raises(KeyboardInterrupt):
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
    """R12.9: Ctrl-C in an ``agent/disposed`` listener ends the runtime, and
    the teardown's later stages still run: scoped cleanups, the end of every
    subscription and the detach. They were skipped: a subscriber waited for good."""
    store = _SlowDetach()
    cleaned: list[str] = []
    ended: list[str] = []
    with trio.fail_after(600):
        async with trio.open_nursery() as outer:
            with pytest.RaisesGroup(KeyboardInterrupt, flatten_subgroups=True):
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


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
@pytest.mark.parametrize("how", ["after-a-turn", "at-shutdown"])
async def test_flush_listeners_disposing_each_others_agents_do_not_wait_in_a_circle(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """R2.35, R12.8, R12.9: a ``session/flush`` listener that disposes the other of two
    agents. A's flush waits for B's teardown, whose final flush disposes A, whose
    driver waits in that flush: with no flush bound the two never ended. The second
    dispose stops A and returns, as from A's own turn; both teardowns complete.
    """
    peers: dict[str, retinue.Agent] = {}
    errors: list[BaseException] = []
    async with runtime(
        ScriptedModel([Reply("ok")], repeat_last=True), flush_timeout=math.inf
    ) as rt:
        for name in ("a", "b"):
            peers[name] = await rt.create_agent(name, OPTIONS)

        async def dispose_the_other(flushed: retinue.Agent, _session: Session) -> None:
            if how == "at-shutdown" and flushed.status != "disposed":
                return
            (other,) = [agent for agent in peers.values() if agent is not flushed]
            await other.dispose()

        rt.hooks.on("session/flush", dispose_the_other)
        rt.hooks.on("agent/error", lambda _agent, _turn, _step, error: errors.append(error))
        if how == "after-a-turn":
            assert (await peers["a"].ask("hi")).reason.kind == "completed"
            for agent in peers.values():
                await agent.dispose()
            assert len(rt.agents) == 0
    assert errors == []
    for agent in peers.values():
        assert agent.status == "disposed"
        check_session_invariants(agent.session.events)


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
    """R2.35, R12.9: the final detach runs in the agent's teardown; a ``dispose`` there
    returns, as from the agent's own turn, and a ``wait_idle`` raises ``WAITS_FOR_ITSELF``.
    Both waited for the teardown they ran in: with no flush bound it never ended.
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
    """R12.10: ``rt.aclose()`` from a ``session/flush`` listener begins the shutdown and
    returns; it waited for every teardown, its own agent's too, which waits for that
    flush: with no flush bound it never ended. The runtime's exit waits for them all.
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
    """R12.9: a ``session/flush`` listener that disposes its agent and resumes it waited
    for the id to be free, which happens once the teardown ends, which waits for that
    flush: with no flush bound it never ended. It raises ``WAITS_FOR_ITSELF``.
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


def _ask_b_and_fire(
    peers: dict[str, retinue.Agent],
    fired: str,
    store: _SlowDetach,
    seen: list[list[str]],
    go: trio.Event | None = None,
) -> list[retinue.Tool]:
    """Tools ``ask_b`` (ask agent ``b``) and ``fire`` (once *go* is set, dispose agent
    *fired* and note in *seen* which sessions *store* had detached by then)."""

    @retinue.tool
    async def ask_b() -> str:
        """Ask B."""
        await peers["b"].ask("please")
        return "asked"

    @retinue.tool
    async def fire() -> str:
        """Dispose the agent to fire."""
        if go is not None:
            await go.wait()
        await peers[fired].dispose()
        seen.append(list(store.detached))
        return "fired"

    return [ask_b, fire]


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
async def test_disposing_an_agent_that_asked_the_caller_waits_for_its_teardown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8: A's tool asks B, and B's tool disposes A. The dispose cancels A's ask, so
    nothing waits in a circle: it returns once A's teardown is over (its session
    detached, the agent gone from the registry), as for every caller.
    """
    store = _SlowDetach()
    peers: dict[str, retinue.Agent] = {}
    seen: list[list[str]] = []
    model = ScriptedModel(
        {
            "a": [CallTools([ToolCallSpec("ask_b", "{}", id="ca")]), Reply("ok")],
            "b": [CallTools([ToolCallSpec("fire", "{}", id="cb")]), Reply("ok")],
        }
    )
    tools = _ask_b_and_fire(peers, "a", store, seen)
    with trio.fail_after(60):
        async with runtime(model, tools=tools, store=store) as rt:
            for name in ("a", "b"):
                options = retinue.AgentOptions(model=name)
                peers[name] = await rt.create_agent(name, options, session_id=name)
            peers["a"].send("go")
            await peers["b"].wait_idle()
            await trio.sleep(5)
            assert seen == [["a"]]
            assert rt.agents.get("a") is None
            assert turn_ends(peers["a"].session.events) == ["disposed"]


class _DetachDisposingTheOther(DelegatingStore):
    """A memory store whose detach of one agent's session first disposes the other agent."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.agents: dict[str, retinue.Agent] = {}
        self.detached: list[str] = []

    async def detach(self, session: Session) -> None:
        (other,) = [agent for name, agent in self.agents.items() if name != session.id]
        await other.dispose()
        await self.store.detach(session)
        self.detached.append(session.id)


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
@pytest.mark.parametrize("how", ["aclose", "dispose-both", "dispose-one"])
async def test_teardowns_disposing_each_other_do_not_wait_in_a_circle(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """R12.8, R12.9: each agent's final detach disposes the other agent. A's teardown
    waited for B's, whose detach waited for A's: with no flush bound neither ended. A
    teardown's wait is recorded as its agent's, so the second dispose finds the circle,
    stops its agent and returns; both teardowns complete and both sessions are detached.
    """
    store = _DetachDisposingTheOther()
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, store=store, flush_timeout=math.inf) as rt:
        for name in ("a", "b"):
            store.agents[name] = await rt.create_agent(name, OPTIONS, session_id=name)
        if how == "aclose":
            await rt.aclose()
        elif how == "dispose-both":
            async with trio.open_nursery() as nursery:
                for agent in store.agents.values():
                    nursery.start_soon(agent.dispose)
        else:
            await store.agents["a"].dispose()
    assert sorted(store.detached) == ["a", "b"]
    assert [agent.status for agent in store.agents.values()] == ["disposed", "disposed"]


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
async def test_an_agent_created_from_a_flush_listener_is_disposed_like_any_other(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8: an agent created from another's ``session/flush`` listener is no part of that
    flush: its tool's ``ask`` is a wait its disposal cancels, so a dispose from the asked
    agent's tool waits for its teardown as for any other agent.
    """
    store = _SlowDetach()
    peers: dict[str, retinue.Agent] = {}
    seen: list[list[str]] = []
    model = ScriptedModel(
        {
            "a": [Reply("ok")],
            "c": [CallTools([ToolCallSpec("ask_b", "{}", id="cc")]), Reply("ok")],
            "b": [CallTools([ToolCallSpec("fire", "{}", id="cb")]), Reply("ok")],
        }
    )
    tools = _ask_b_and_fire(peers, "c", store, seen)
    with trio.fail_after(60):
        async with runtime(model, tools=tools, store=store, flush_timeout=math.inf) as rt:

            async def start_c(_agent: retinue.Agent, _session: Session) -> None:
                if "c" not in peers:
                    options = retinue.AgentOptions(model="c")
                    peers["c"] = await rt.create_agent("c", options, session_id="c")
                    peers["c"].send("go")

            a = await rt.create_agent("a", retinue.AgentOptions(model="a"), session_id="a")
            b = await rt.create_agent("b", retinue.AgentOptions(model="b"), session_id="b")
            peers["b"] = b
            rt.hooks.on("session/flush", start_c, agent=a)
            await a.ask("hi")
            await trio.sleep(5)
            await b.wait_idle()
            assert seen == [["c"]]


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
@pytest.mark.parametrize("run", range(8))
async def test_a_dispose_sees_no_circle_through_an_agent_already_disposed(
    autojump_clock: trio.testing.MockClock, run: int
) -> None:
    """R12.8: A's flush listener disposes C, whose tool was asking B, while B's tool
    disposes A. C's ask ends with C's disposal, so nothing waits in a circle and B's
    dispose waits for A's teardown. Whether C's ask had unwound when B's dispose looked
    depends on trio's scheduling order, so the scenario runs several times (*run*).
    """
    store = _SlowDetach()
    peers: dict[str, retinue.Agent] = {}
    go = trio.Event()
    seen: list[list[str]] = []
    model = ScriptedModel(
        {
            "a": [Reply("ok")],
            "b": [CallTools([ToolCallSpec("fire", "{}", id="cb")]), Reply("ok")],
            "c": [CallTools([ToolCallSpec("ask_b", "{}", id="cc")]), Reply("ok")],
        }
    )
    tools = _ask_b_and_fire(peers, "a", store, seen, go)
    async with runtime(model, tools=tools, store=store, flush_timeout=math.inf) as rt:
        for name in ("a", "b", "c"):
            options = retinue.AgentOptions(model=name)
            peers[name] = await rt.create_agent(name, options, session_id=name)

        async def dispose_c(_agent: retinue.Agent, _session: Session) -> None:
            go.set()
            await peers["c"].dispose()

        rt.hooks.on("session/flush", dispose_c, agent=peers["a"])
        peers["c"].send("go")
        await trio.sleep(1)  # C's tool waits on B's turn, B's tool on go
        peers["a"].send("hi")
        await trio.sleep(10)
    assert len(seen) == 1
    assert "a" in seen[0]


class _DetachOfBDisposingA(DelegatingStore):
    """A memory store whose detach of session ``b`` first disposes agent ``a``."""

    def __init__(self, pause: float) -> None:
        super().__init__(MemoryStore())
        self.pause = pause
        self.agents: dict[str, retinue.Agent] = {}
        self.detached: list[str] = []

    async def detach(self, session: Session) -> None:
        if session.id == "b":
            await trio.sleep(self.pause)
            await self.agents["a"].dispose()
        await self.store.detach(session)
        self.detached.append(session.id)


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
@pytest.mark.parametrize(("pause", "heard"), [(0, "WAIT_CYCLE"), (1, "SESSION_NOT_FOUND")])
async def test_resuming_an_id_whose_teardown_disposes_the_caller_does_not_wait_in_a_circle(
    autojump_clock: trio.testing.MockClock, pause: float, heard: str
) -> None:
    """R12.8, R12.9: B's teardown (its store's detach) disposes A, and A's flush listener
    resumes ``b``, which waits for B's teardown to free the id. That wait was not
    recorded, so with no flush bound the two never ended. Waiting in a circle now raises
    ``WAIT_CYCLE`` in the listener; when the dispose comes second it is the one that
    sees the circle and returns, and the resume goes on (and finds nothing stored).
    """
    store = _DetachOfBDisposingA(pause)
    outcome: list[str] = []
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, store=store, flush_timeout=math.inf) as rt:
        for name in ("a", "b"):
            store.agents[name] = await rt.create_agent(name, OPTIONS, session_id=name)

        async def resume_b(_agent: retinue.Agent, _session: Session) -> None:
            if not outcome:
                try:
                    await rt.resume_agent("b")
                except (retinue.AgentError, retinue.StoreError) as exc:
                    outcome.append(str(exc.code))

        rt.hooks.on("session/flush", resume_b, agent=store.agents["a"])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.agents["b"].dispose)
            if pause:
                await trio.sleep(0.1)
                nursery.start_soon(store.agents["a"].ask, "hi")
    assert outcome == [heard]
    assert sorted(store.detached) == ["a", "b"]


class _DetachWaitingOnAnother(DelegatingStore):
    """A memory store whose detach first calls *verb* on the agent *target* names (once set)."""

    def __init__(self, verb: str) -> None:
        super().__init__(MemoryStore())
        self.verb = verb
        self.target: retinue.Agent | None = None
        self.heard: list[str] = []

    async def detach(self, session: Session) -> None:
        if self.target is not None:
            try:
                await (self.target.dispose() if self.verb == "dispose" else self.target.wait_idle())
                self.heard.append("returned")
            except retinue.AgentError as exc:
                self.heard.append(str(exc.code))
        await self.store.detach(session)


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
@pytest.mark.parametrize("flush_timeout", [30.0, math.inf])
@pytest.mark.parametrize(("verb", "heard"), [("dispose", "returned"), ("wait_idle", "WAIT_CYCLE")])
async def test_closing_a_runtime_from_a_flush_listener_is_a_wait_a_teardown_cannot_close(
    autojump_clock: trio.testing.MockClock, flush_timeout: float, verb: str, heard: str
) -> None:
    """R12.8, R12.10: A's ``session/flush`` listener closes another runtime, whose agent
    B's final detach then waits on A. The close waits for B's teardown but was not
    recorded as A's wait, so B's wait on A closed a circle nobody saw: the flush stalled
    for ``flush_timeout``, and with no bound never ended. It is recorded like a
    ``wait_idle``: B's ``wait_idle`` raises ``WAIT_CYCLE`` and B's ``dispose`` stops A
    and returns, at once; both runtimes close and every event is committed.
    """
    inner_store = _DetachWaitingOnAnother(verb)
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, flush_timeout=flush_timeout) as outer:
        async with runtime(model, store=inner_store, flush_timeout=flush_timeout) as inner:
            a = await outer.create_agent("a", OPTIONS, session_id="a")
            b = await inner.create_agent("b", OPTIONS, session_id="b")
            inner_store.target = a

            async def close_inner(_agent: retinue.Agent, _session: Session) -> None:
                await inner.aclose()

            outer.hooks.on("session/flush", close_inner, agent=a)
            began = trio.current_time()
            assert (await a.ask("hi")).reason.kind == "completed"
            await a.wait_idle()
            assert trio.current_time() - began < 1, "the flush waited out its bound"
            assert inner_store.heard == [heard]
            assert len(inner.agents) == 0
        committed = inner_store.store.statistics().committed_events
        assert committed == len(b.session.events)
    assert a.status == "disposed"
    check_session_invariants(a.session.events)
    check_session_invariants(b.session.events)


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
async def test_closing_a_runtime_whose_teardown_waits_on_the_caller_raises_wait_cycle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R12.10: B's final detach waits for A's turn, and A's tool then closes B's
    runtime, which waits for B's teardown: a circle, which stalled the turn for
    ``flush_timeout``. The close begins the shutdown and raises ``WAIT_CYCLE`` naming
    the circle; A's turn goes on, B's teardown ends with it, and the runtime closes.
    """
    inner_store = _DetachWaitingOnAnother("wait_idle")
    codes: list[str | None] = []
    messages: list[str] = []
    holder: dict[str, retinue.Runtime] = {}

    @retinue.tool
    async def close_inner() -> str:
        """Close the inner runtime."""
        await trio.sleep(1)
        try:
            await holder["inner"].aclose()
        except retinue.AgentError as exc:
            codes.append(exc.code)
            messages.append(str(exc))
        return "closed"

    outer_model = ScriptedModel(
        [CallTools([ToolCallSpec("close_inner", "{}", id="c1")]), Reply("ok")]
    )
    inner_model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(outer_model, tools=[close_inner]) as outer:
        async with runtime(inner_model, store=inner_store) as inner:
            holder["inner"] = inner
            a = await outer.create_agent("a", OPTIONS, session_id="a")
            b = await inner.create_agent("b", OPTIONS, session_id="b")
            inner_store.target = a
            a.send("go")
            began = trio.current_time()
            await b.dispose()  # its detach waits for A's turn, whose tool closes the runtime
            assert trio.current_time() - began < 5, "the turn waited out the flush bound"
            assert inner.closing
            assert codes == ["WAIT_CYCLE"]
            assert "('a' -> 'b' -> 'a')" in messages[0]
            assert inner_store.heard == ["returned"]
        committed = inner_store.store.statistics().committed_events
        assert committed == len(b.session.events)
        assert turn_ends(a.session.events) == ["completed"]
