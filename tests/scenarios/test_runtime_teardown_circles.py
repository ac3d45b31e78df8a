"""Teardowns that wait on each other: agents whose tools, flush listeners or stores
dispose, resume or close one another do not wait in a circle
(SPEC R2.35, R12.8, R12.9, R12.10)."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing

import retinue
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, last_end_reason, runtime, turn_ends
from tests.scenarios._runtime_teardown_kit import SlowDetach


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


def _ask_b_and_fire(
    peers: dict[str, retinue.Agent],
    fired: str,
    store: SlowDetach,
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
        # B's turn serves A's ask, so disposing A aborts it (R2.29, the parent cause):
        # shielded, the dispose is seen to its end.
        with trio.CancelScope(shield=True):
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
    store = SlowDetach()
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
            assert last_end_reason(peers["b"].session.events).reason == (
                "parent agent 'a' was disposed"
            )


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
    """R12.8, R12.9: each agent's final detach disposes the other agent. A's teardown waits for B's,
    whose detach waits for A's: unrecorded, with no flush bound, neither would end. A teardown's
    wait is recorded as its agent's, so the second dispose finds the circle, stops its agent and
    returns; both teardowns complete and both sessions are detached.
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
    store = SlowDetach()
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
    store = SlowDetach()
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
    """R12.8, R12.9: B's teardown (its store's detach) disposes A, and A's flush listener resumes
    ``b``, which waits for B's teardown to free the id. Unrecorded, that wait would, with no flush
    bound, leave the two never ending. Waiting in a circle raises ``WAIT_CYCLE`` in the listener;
    when the dispose comes second it is the one that sees the circle and returns, and the resume
    goes on (and finds nothing stored).
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
    """R12.8, R12.10: A's ``session/flush`` listener closes another runtime, whose agent B's final
    detach then waits on A. The close waits for B's teardown and is recorded like a ``wait_idle``,
    as A's wait, so B's wait on A closes a circle that is seen: B's ``wait_idle`` raises
    ``WAIT_CYCLE`` and B's ``dispose`` stops A and returns, at once; both runtimes close and every
    event is committed. Unrecorded, the circle would stall the flush for ``flush_timeout``, and with
    no bound for good.
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
