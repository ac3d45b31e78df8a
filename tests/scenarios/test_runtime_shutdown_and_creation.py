"""Runtime shutdown, many agents at once, and creations refused or unwound around their
setup (SPEC R4.13-R4.16, R12.1, R12.5, R12.10, R13.1)."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, StoreError
from retinue.actors import Subscription
from retinue.session import Session, ToolResultEvent
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.helpers import OPTIONS, nap, of_type, runtime, turn_ends


@retinue.tool
async def tally(n: int) -> str:
    """Count, exclusively.

    Args:
        n: A number.
    """
    await trio.lowlevel.checkpoint()
    return str(n + 1)


async def test_runtime_shutdown_disposes_every_agent_and_flushes_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10, R12.9, R2.36: leaving ``open_runtime`` disposes each agent; open turns end ``disposed`` and are flushed."""
    model = ScriptedModel(
        {
            "hang": [Hang("thinking")],
            "tools": [CallTools([ToolCallSpec("nap", '{"seconds": 1000}', id="t1")])],
            "idle": [Reply("hi")],
        }
    )
    flushed: dict[str, int] = {}
    disposed: list[str] = []

    def on_flush(_agent: retinue.Agent, session: retinue.Session) -> None:
        flushed[session.id] = len(session.events)

    async with runtime(model, tools=[nap]) as rt:
        rt.hooks.on("session/flush", on_flush)
        rt.hooks.on("agent/disposed", lambda agent: disposed.append(agent.id))
        streaming = await rt.create_agent("s", AgentOptions(model="hang"))
        tooling = await rt.create_agent("t", AgentOptions(model="tools"))
        idle = await rt.create_agent("i", AgentOptions(model="idle"))
        assert (await idle.ask("hello")).reason.kind == "completed"
        streaming.send("go")
        tooling.send("go")
        await trio.sleep(5)
        assert streaming.status == tooling.status == "running"
        agents = [streaming, tooling, idle]
    assert sorted(disposed) == sorted(a.id for a in agents)
    assert len(rt.agents) == 0
    for agent in agents:
        events = agent.session.events
        assert agent.status == "disposed"
        check_session_invariants(events)
        assert flushed[agent.id] == len(events), f"{agent.id}: closing events not flushed"
    assert turn_ends(streaming.session.events) == ["disposed"]
    assert turn_ends(tooling.session.events) == ["disposed"]
    (answer,) = [e.data for e in of_type(tooling.session.events, "tool/result")]
    assert isinstance(answer, ToolResultEvent)
    assert answer.error is not None
    assert answer.error.code == "ABORTED"
    assert turn_ends(idle.session.events) == ["completed"]


@pytest.mark.parametrize("how", ["create", "resume"])
async def test_runtime_shutdown_aborts_a_creation_still_in_its_setup(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """R12.10: ``aclose`` aborts creations in flight ("agent loop is not active") and awaits them.

    The setup's scoped listener is unwound, nothing is published, and no
    agent runs after shutdown.
    """
    heard: list[str] = []
    outcomes: list[object] = []
    model = ScriptedModel([Reply("hi")], repeat_last=True)
    async with runtime(model) as rt:
        stored = await rt.create_agent("stored", OPTIONS)
        await stored.ask("hello")
        await stored.dispose()

        async def slow_setup(agent: retinue.Agent) -> None:
            rt.hooks.on("agent/status", lambda _a, status: heard.append(status), agent=agent)
            await trio.sleep(10)

        async def create() -> None:
            try:
                if how == "create":
                    outcomes.append(await rt.create_agent("late", OPTIONS, setup=slow_setup))
                else:
                    outcomes.append(await rt.resume_agent(stored.id, OPTIONS, setup=slow_setup))
            except RuntimeError as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create)
            await trio.sleep(1)
            await rt.aclose()
            assert len(outcomes) == 1, "aclose returned before the creation unwound"
        (outcome,) = outcomes
        assert isinstance(outcome, RuntimeError)
        assert "agent loop is not active" in str(outcome)
        assert len(rt.agents) == 0
        assert not rt.hooks.has_listeners("agent/status")
        assert heard == []


async def test_runtime_runs_two_hundred_agents_with_tool_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.13-R4.16, R9.17, R9.25: 200 agents x 3 turns of mixed parallel/exclusive tool calls all complete soundly."""
    model = ScriptedModel.tool_loop(
        ["nap", "tally", "nap", "nap"],
        calls_per_step=4,
        answer_chunks=3,
        arguments={"nap": '{"seconds": 1}', "tally": '{"n": 2}'},
        delay=0.5,
    )
    async with runtime(model, tools=[nap, tally], max_parallel_tool_calls=2) as rt:
        agents = [await rt.create_agent(f"a{i}", OPTIONS) for i in range(200)]
        outcomes: dict[str, list[retinue.TurnResult]] = {agent.id: [] for agent in agents}

        async def converse(agent: retinue.Agent) -> None:
            for turn in range(3):
                outcomes[agent.id].append(await agent.ask(f"question {turn}"))

        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(converse, agent)
        for agent in agents:
            assert [r.reason.kind for r in outcomes[agent.id]] == ["completed"] * 3
            assert [r.turn for r in outcomes[agent.id]] == [1, 2, 3]
            events = agent.session.events
            check_session_invariants(events)
            check_no_dangling_tool_calls(events)
            assert len(of_type(events, "tool/result")) == 12
            calls = [json.loads(e.data.arguments) for e in of_type(events, "tool/call")]  # type: ignore[union-attr]
            assert len(calls) == 12
            assert agent.status == "idle"
        assert len(rt.agents) == 200
        assert model.statistics().calls == 200 * 3 * 2


class _RefusingStore(DelegatingStore):
    """A memory store that refuses every new session when the runtime publishes it."""

    def attach_new(self, session: Session) -> None:
        raise StoreError(f"session {session.id!r} cannot be stored", code="STORAGE_ERROR")


@pytest.mark.timeout(30)  # a hang inside a shield is out of the virtual clock's reach
async def test_dispose_of_an_agent_whose_setup_failed_returns_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R12.9: a handle whose creation failed was never started: disposing it ends at
    once, and so does a subscription opened in its setup.
    """
    kept: list[retinue.Agent] = []
    subscriptions: list[Subscription] = []

    def failing_setup(agent: retinue.Agent) -> None:
        kept.append(agent)
        subscriptions.append(agent.subscribe())
        raise ValueError("setup failed")

    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(ValueError, match="setup failed"):
            await rt.create_agent("a", OPTIONS, setup=failing_setup)
        await kept[0].dispose()
        assert kept[0].status == "disposed"
        assert len(rt.agents) == 0
        with trio.move_on_after(60) as waited:
            async with subscriptions[0] as events:
                assert [event async for event in events] == []
        assert not waited.cancelled_caught, "the torn-down agent's subscription never ended"


@pytest.mark.timeout(30)  # a hang inside a shield is out of the virtual clock's reach
async def test_agent_disposed_during_its_setup_is_never_published(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.5, R12.8: disposing an agent in its own setup returns; the creation then refuses
    to publish it (``AgentDisposedError``) and unwinds what the setup registered.
    """
    heard: list[str] = []

    async def setup(agent: retinue.Agent) -> None:
        rt.hooks.on("agent/status", lambda _a, status: heard.append(status), agent=agent)
        await agent.dispose()

    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(retinue.AgentDisposedError, match="disposed during its setup"):
            await rt.create_agent("b", OPTIONS, setup=setup)
        assert len(rt.agents) == 0
        assert not rt.hooks.has_listeners("agent/status")
    assert heard == []  # R12.6: an unload during setup publishes nothing


@pytest.mark.parametrize("agent_id", ["..", "x" * 600, "a/b", ""])
async def test_create_agent_refuses_an_id_no_store_can_hold_before_its_setup(
    autojump_clock: trio.testing.MockClock, agent_id: str
) -> None:
    """R12.5, R11.12: an id the store would refuse is refused up front; setup never runs."""
    ran: list[retinue.Agent] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(retinue.SessionError) as refused:
            await rt.create_agent("c", OPTIONS, session_id=agent_id, setup=ran.append)
        assert refused.value.code == "INVALID_SESSION_ID"
        assert ran == []


@pytest.mark.parametrize("how", ["create", "resume", "fork", "fork-source"])
@pytest.mark.parametrize(
    ("agent_id", "problem"),
    [
        (["s"], "is not a string"),
        (7, "is not a string"),
        ("", "is empty"),
        ("a/b", "contains a path separator"),
    ],
    ids=["unhashable", "int", "empty", "path-separator"],
)
async def test_every_way_to_start_an_agent_refuses_an_id_no_store_can_hold_alike(
    autojump_clock: trio.testing.MockClock, how: str, agent_id: object, problem: str
) -> None:
    """R12.1, R11.12: ``create_agent``, ``resume_agent`` and ``fork_agent_session`` (the fork's id
    and its source's) refuse an id the store would refuse with ``SessionError(INVALID_SESSION_ID)``
    naming the id, before anything runs: an unhashable one is no bare ``TypeError`` from looking the
    id up first, and a fork makes no session that no agent could start on.
    """
    ran: list[retinue.Agent] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        await rt.create_agent("source", OPTIONS, session_id="source")

        async def start() -> object:
            if how == "create":
                return await rt.create_agent("c", OPTIONS, session_id=agent_id, setup=ran.append)  # type: ignore[arg-type]
            if how == "resume":
                return await rt.resume_agent(agent_id, OPTIONS, setup=ran.append)  # type: ignore[arg-type]
            if how == "fork-source":
                return rt.fork_agent_session(agent_id, "child")  # type: ignore[arg-type]
            return rt.fork_agent_session("source", agent_id)  # type: ignore[arg-type]

        with pytest.raises(retinue.SessionError) as refused:
            await start()
        assert refused.value.code == "INVALID_SESSION_ID"
        assert refused.value.message == f"session id {agent_id!r} {problem}"
        assert ran == []
        assert [agent.id for agent in rt.agents] == ["source"]


@pytest.mark.parametrize(
    ("name", "session_id", "problem"),
    [
        ("", None, "name must be a non-empty str labelling the agent, got ''"),
        ("", "s-1", "name must be a non-empty str labelling the agent, got ''"),
        (None, None, "name must be a non-empty str labelling the agent, got None"),
        ("a/b", None, "name 'a/b' cannot label a session: session id 'a/b-session-"),
    ],
    ids=["empty", "empty-beside-session-id", "None", "path-separator"],
)
async def test_create_agent_refuses_a_name_that_cannot_label_the_agent_naming_the_argument(
    autojump_clock: trio.testing.MockClock, name: object, session_id: str | None, problem: str
) -> None:
    """R13.1, R13.3: the name labels the agent and begins its fresh id
    ``<name>-session-<uuid4>``; like a configured agent's label it is a non-empty str, and
    a name that cannot label one is refused before the setup runs, naming ``name``."""
    ran: list[retinue.Agent] = []
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(retinue.SessionError) as refused:
            await rt.create_agent(name, OPTIONS, session_id=session_id, setup=ran.append)  # type: ignore[arg-type]
        assert refused.value.code == "INVALID_SESSION_ID"
        assert refused.value.message.startswith(problem)
        assert ran == []
        assert len(rt.agents) == 0


async def test_failed_publication_unwinds_the_setup(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.5, R12.6: when the store refuses the new session, the setup's registrations go."""

    def setup(agent: retinue.Agent) -> None:
        rt.hooks.on("agent/status", lambda _a, _status: None, agent=agent)

    store = _RefusingStore(MemoryStore())
    async with runtime(ScriptedModel([Reply("hi")]), store=store) as rt:
        with pytest.raises(StoreError, match="cannot be stored"):
            await rt.create_agent("d", OPTIONS, setup=setup)
        assert len(rt.agents) == 0
        assert not rt.hooks.has_listeners("agent/status")


async def test_an_id_is_reserved_while_its_creation_runs_its_setup(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F8 / R12.5: an id is reserved across a creation's setup: a second create of it
    while the first is still being set up is refused as live, and the first goes on."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        created: list[retinue.Agent] = []

        async def slow_setup(_agent: retinue.Agent) -> None:
            await trio.sleep(10)

        async def first() -> None:
            created.append(await rt.create_agent("a", OPTIONS, session_id="x", setup=slow_setup))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            await trio.sleep(1)
            with pytest.raises(retinue.SessionError) as refused:
                await rt.create_agent("b", OPTIONS, session_id="x")
            assert refused.value.code == "SESSION_ALREADY_EXISTS"
        assert [agent.id for agent in created] == ["x"]
        assert (await created[0].ask("hi")).reason.kind == "completed"
