"""Waiting on an agent from its own setup (R12.5, R12.6, R12.8).

An agent disposed during its setup is never published: it ends with its
creation, and the creation waits for the setup. A wait on the agent's end from
that setup is refused as a wait on itself rather than left hanging.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentDisposedError, AgentError
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


async def _directly(wait: Callable[[], Awaitable[None]]) -> None:
    await wait()


async def _from_a_child_task(wait: Callable[[], Awaitable[None]]) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)


@pytest.mark.parametrize("waiter", [_directly, _from_a_child_task], ids=["setup", "child task"])
async def test_wait_idle_from_the_own_setup_after_disposing_is_refused(
    autojump_clock: trio.testing.MockClock,
    waiter: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]],
) -> None:
    """R12.8, R12.5: disposed in its own setup, the agent ends only when the creation does,
    which waits for the setup: ``wait_idle`` there (or in a task the setup waits for)
    raises ``AgentError(WAITS_FOR_ITSELF)`` at once instead of waiting forever.
    """
    refused: list[BaseException] = []

    async def setup(agent: retinue.Agent) -> None:
        await agent.dispose()
        try:
            await waiter(agent.wait_idle)
        except* AgentError as group:
            refused.extend(group.exceptions)

    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        started = trio.current_time()
        with pytest.raises(AgentDisposedError, match="disposed during its setup"):
            await rt.create_agent("a", OPTIONS, setup=setup)
        assert trio.current_time() == started, "the refusal waited first"
        assert len(refused) == 1
        assert isinstance(refused[0], AgentError)
        assert refused[0].code == "WAITS_FOR_ITSELF"
        assert "setup" in str(refused[0])
        assert len(rt.agents) == 0


async def test_ask_from_the_own_setup_after_disposing_is_refused_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.9, R12.6: ``ask`` of an agent disposed in its own setup sends nothing and so waits
    for nothing: it raises ``AgentDisposedError`` at once.
    """
    refused: list[BaseException] = []

    async def setup(agent: retinue.Agent) -> None:
        await agent.dispose()
        with pytest.raises(AgentDisposedError) as raised:
            await agent.ask("hi")
        refused.append(raised.value)

    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        started = trio.current_time()
        with pytest.raises(AgentDisposedError, match="disposed during its setup"):
            await rt.create_agent("a", OPTIONS, setup=setup)
        assert trio.current_time() == started
        assert len(refused) == 1
        assert model.requests == []


async def test_a_task_the_setup_started_elsewhere_waits_for_the_published_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a task the setup started in another nursery is no part of the setup once the
    agent is published: disposing the agent and waiting there waits for its teardown.
    """
    waited: list[str] = []

    async def later(agent: retinue.Agent) -> None:
        await trio.sleep(5)
        await agent.dispose()
        await agent.wait_idle()
        waited.append(agent.status)

    async with runtime(ScriptedModel([Reply("hi")])) as rt, trio.open_nursery() as outside:
        agent = await rt.create_agent(
            "a", OPTIONS, setup=lambda agent: outside.start_soon(later, agent)
        )
        assert agent.status == "idle"
    assert waited == ["disposed"]
    assert len(rt.agents) == 0


async def test_wait_idle_from_a_setup_nested_in_the_disposed_agents_setup_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8: A's setup disposes A, then creates B, whose setup waits on A. A's creation
    waits for B's, so that wait would never end: refused too, not only the innermost setup's."""
    refused: list[AgentError] = []

    async def setup_a(a: retinue.Agent) -> None:
        await a.dispose()

        async def setup_b(_b: retinue.Agent) -> None:
            try:
                await a.wait_idle()
            except AgentError as exc:
                refused.append(exc)

        await rt.create_agent("b", OPTIONS, setup=setup_b)

    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        started = trio.current_time()
        with pytest.raises(AgentDisposedError, match="disposed during its setup"):
            await rt.create_agent("a", OPTIONS, setup=setup_a)
        assert trio.current_time() == started, "the refusal waited first"
        assert [exc.code for exc in refused] == ["WAITS_FOR_ITSELF"]
        assert len(rt.agents) == 1  # b: its setup went on after the refusal


async def test_a_task_the_setup_started_elsewhere_disposing_the_agent_aborts_the_setup(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.4, R12.8: a watchdog the setup started in another nursery is no part of the setup,
    which does not wait for it: its ``dispose`` aborts the setup, as any other caller's does,
    and returns once the creation has unwound.
    """
    heard: list[float] = []

    async def watchdog(agent: retinue.Agent) -> None:
        await trio.sleep(5)
        await agent.dispose()
        heard.append(trio.current_time())

    async def setup(agent: retinue.Agent) -> None:
        outside.start_soon(watchdog, agent)
        await trio.sleep(100)

    async with runtime(ScriptedModel([Reply("hi")])) as rt, trio.open_nursery() as outside:
        with pytest.raises(AgentDisposedError, match="disposed during its setup"):
            await rt.create_agent("a", OPTIONS, setup=setup)
        assert trio.current_time() == 5, "the setup ran on past the dispose"
    assert heard == [5]
    assert len(rt.agents) == 0


@pytest.mark.parametrize("verb", ["wait_idle", "aclose"])
async def test_a_task_the_setup_started_elsewhere_waits_for_the_creations_end(
    autojump_clock: trio.testing.MockClock, verb: str
) -> None:
    """R12.8, R12.10: the setup disposes its agent (or a task it started elsewhere closes the
    runtime) and takes a while to unwind. That task's ``wait_idle`` or ``rt.aclose()`` waits
    for the creation to end, which does not wait for the task, rather than raise
    ``WAITS_FOR_ITSELF`` or return before the setup has unwound.
    """
    heard: list[object] = []

    async def later(agent: retinue.Agent) -> None:
        await (agent.wait_idle() if verb == "wait_idle" else rt.aclose())
        heard.extend((agent.status, trio.current_time()))

    async def setup(agent: retinue.Agent) -> None:
        if verb == "wait_idle":
            await agent.dispose()
        outside.start_soon(later, agent)
        with trio.CancelScope(shield=True):
            await trio.sleep(3)

    async with runtime(ScriptedModel([Reply("hi")])) as rt, trio.open_nursery() as outside:
        with pytest.raises((AgentDisposedError, RuntimeError)):
            await rt.create_agent("a", OPTIONS, setup=setup)
    assert heard == ["disposed", 3]
