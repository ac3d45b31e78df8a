"""``start_forked`` refuses a session an agent drives: a session has one driver (R12.7).

It takes the session ``fork_agent_session`` returned. Given the live session of
an agent (of another runtime, whose own checks cannot see it) it started a
second driver on that log, whose turns failed as the log refused a turn opened
inside the other's. Once that agent is torn down, its store having let go of
the session, no agent drives it: whether it starts is its store's business.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue.session import Session
from retinue.stores._writebehind import BufferedStore
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, runtime


def model() -> ScriptedModel:
    return ScriptedModel([Reply("ok")], repeat_last=True)


async def test_start_forked_refuses_the_session_a_live_agent_of_another_runtime_drives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.7: the live session is refused; its agent goes on alone, its log whole."""
    async with runtime(model()) as rt, runtime(model()) as other:
        agent = await rt.create_agent("a", OPTIONS)
        with pytest.raises(retinue.SessionError, match="a session has one driver") as raised:
            await other.start_forked(agent.session, OPTIONS)
        assert raised.value.code == "SESSION_ALREADY_EXISTS"
        assert len(other.agents) == 0
        assert (await agent.ask("still yours?")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_start_forked_of_a_torn_down_agent_s_session_is_its_store_s_to_take(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.7, R11.17: once its agent is torn down, a session is refused only by a store that holds
    it, as any id it holds; a fresh store takes it. No runtime refuses it as one an agent was ever
    started on, pointing at a resume its store cannot serve."""
    async with runtime(model()) as rt, runtime(model()) as other:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi")
        await agent.dispose()
        with pytest.raises(retinue.SessionError, match="already exists") as raised:
            await rt.start_forked(agent.session, OPTIONS)
        assert raised.value.code == "SESSION_ALREADY_EXISTS"
        assert rt.agents.get(agent.id) is None
        again = await other.start_forked(agent.session, OPTIONS)
        assert (await again.ask("again")).reason.kind == "completed"
        check_session_invariants(again.session.events)


async def test_start_forked_of_a_fork_whose_agent_s_runtime_closed_starts_it_elsewhere(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.7: a fork started in a runtime since closed is started in another, on its fresh store,
    not refused as driven while no agent drives it."""
    async with runtime(model()) as rt:
        source = await rt.create_agent("source", OPTIONS)
        await source.ask("hi")
        fork = rt.fork_agent_session(source.id, "child")
        child = await rt.start_forked(fork, OPTIONS)
        await child.ask("branch")
    async with runtime(model()) as other:
        again = await other.start_forked(fork, OPTIONS)
        assert (await again.ask("again")).reason.kind == "completed"
        check_session_invariants(fork.events)
        assert await other.store.exists("child")


async def test_start_forked_refuses_a_disposed_agent_s_session_until_its_teardown_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.7: an agent disposed whose turn still runs (a shielded tool) drives its session
    yet; another runtime is refused it until the teardown has ended, then takes it."""
    holding = trio.Event()

    @retinue.tool(name="hold")
    async def hold() -> str:
        """Hold on through a disposal."""
        holding.set()
        with trio.CancelScope(shield=True):
            await trio.sleep(10)
        return "held"

    scripted = ScriptedModel(
        [CallTools([ToolCallSpec("hold", "{}", id="h1")]), Reply("done")], repeat_last=True
    )
    async with runtime(scripted, tools=[hold]) as rt, runtime(model()) as other:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("hold on")
        await holding.wait()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.dispose)
            await trio.sleep(1)
            with pytest.raises(retinue.SessionError, match="one driver") as raised:
                await other.start_forked(agent.session, OPTIONS)
            assert raised.value.code == "SESSION_ALREADY_EXISTS"
        again = await other.start_forked(agent.session, OPTIONS)
        assert (await again.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_start_forked_of_one_fork_in_two_runtimes_at_once_starts_one_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.7: two starts of one fork whose setups overlap publish one agent; the other
    is refused as it would publish, and leaves nothing behind in its runtime."""
    async with runtime(model()) as rt, runtime(model()) as other:
        source = await rt.create_agent("source", OPTIONS)
        await source.ask("hi")
        fork = rt.fork_agent_session(source.id, "child")
        started: list[retinue.Agent] = []
        refused: list[str | None] = []

        async def start(where: retinue.Runtime, pause: float) -> None:
            async def setup(_agent: retinue.Agent) -> None:
                await trio.sleep(pause)

            try:
                started.append(await where.start_forked(fork, OPTIONS, setup=setup))
            except retinue.SessionError as exc:
                refused.append(exc.code)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(start, rt, 1)
            nursery.start_soon(start, other, 2)
        assert [agent.id for agent in started] == ["child"]
        assert refused == ["SESSION_ALREADY_EXISTS"]
        assert (len(rt.agents), len(other.agents)) == (2, 0)
        assert (await started[0].ask("branch")).reason.kind == "completed"


async def test_start_forked_after_a_failed_start_of_the_fork_starts_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.6: a start whose setup failed published nothing, so the fork is still fresh."""

    def failing_setup(_agent: retinue.Agent) -> None:
        raise RuntimeError("setup failed")

    async with runtime(model()) as rt:
        source = await rt.create_agent("source", OPTIONS)
        await source.ask("hi")
        fork = rt.fork_agent_session(source.id, "child")
        with pytest.raises(RuntimeError, match="setup failed"):
            await rt.start_forked(fork, OPTIONS, setup=failing_setup)
        child = await rt.start_forked(fork, OPTIONS)
        assert (await child.ask("branch")).reason.kind == "completed"


async def _fork_and_interrupt_its_teardown(
    forks: list[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start a fork and dispose of its agent; a Ctrl-C lands in the final detach."""
    detach = BufferedStore.detach

    async def interrupted(store: BufferedStore, session: Session) -> None:
        if session.id == "child":
            raise KeyboardInterrupt
        await detach(store, session)

    async with runtime(model()) as rt:
        source = await rt.create_agent("source", OPTIONS)
        await source.ask("hi")
        forks.append(rt.fork_agent_session(source.id, "child"))
        child = await rt.start_forked(forks[0], OPTIONS)
        await child.ask("branch")
        monkeypatch.setattr(BufferedStore, "detach", interrupted)
        await child.dispose()


async def test_start_forked_of_a_fork_whose_teardown_ctrl_c_cut_short_starts_it_elsewhere(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a Ctrl-C landing in an agent's final detach ends the runtime with it; the session is
    driven no more, and a later runtime of the process (a notebook's next cell) starts it rather
    than refusing it as driven for the life of the process."""
    forks: list[Session] = []
    with pytest.raises(KeyboardInterrupt):
        await _fork_and_interrupt_its_teardown(forks, monkeypatch)
    monkeypatch.undo()
    async with runtime(model()) as other:
        again = await other.start_forked(forks[0], OPTIONS)
        assert (await again.ask("again")).reason.kind == "completed"
