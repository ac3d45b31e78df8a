"""Tasks an agent's teardown starts in a nursery of their own (SPEC R2.30, R12.9).

A sync ``agent/disposed`` listener acts on a disposal by starting a task in a
nursery of its caller's: the teardown never waits for that task, so the task
waits for the teardown as any other task would. Only the teardown itself, and
tasks it runs in nurseries of its own, cannot wait for it.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import retinue
from retinue.session import Session
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import OPTIONS, runtime, turn_ends
from tests.scenarios._runtime_teardown_kit import SlowDetach

Started = Callable[[retinue.Agent], Awaitable[None]]


async def _start_on_disposal(rt: retinue.Runtime, agent: retinue.Agent, task: Started) -> None:
    """Dispose *agent* with a listener that starts *task* in a nursery of the test's, and
    wait until the task has ended."""
    done = trio.Event()

    async def run(old: retinue.Agent) -> None:
        try:
            await task(old)
        finally:
            done.set()

    async with trio.open_nursery() as mine:
        rt.hooks.on("agent/disposed", lambda old: mine.start_soon(run, old), agent=agent)
        await agent.dispose()
        await done.wait()


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
async def test_a_task_a_disposed_listener_starts_elsewhere_resumes_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.30, R12.9: ``wait_idle`` from a task an ``agent/disposed`` listener started in the
    user's nursery waits for the teardown, which does not wait for that task, and
    ``resume_agent`` of the id waits for the id to be free and resumes the session.
    """
    store = SlowDetach()
    heard: list[object] = []

    async def reborn(old: retinue.Agent) -> None:
        await old.wait_idle()
        heard.append(list(store.detached))
        again = await rt.resume_agent(old.id, OPTIONS)
        heard.append(again.session.last_turn)

    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="a")
        await agent.ask("one")
        await _start_on_disposal(rt, agent, reborn)
        assert heard == [["a"], 1]
        assert [a.id for a in rt.agents] == ["a"]


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
@pytest.mark.parametrize("verb", ["dispose", "aclose"])
async def test_a_task_a_disposed_listener_starts_elsewhere_waits_for_the_teardown(
    autojump_clock: trio.testing.MockClock, verb: str
) -> None:
    """R12.8, R12.9, R12.10: ``dispose()`` and ``rt.aclose()`` from a task a disposed listener
    started in the user's nursery return once the teardown has ended (the final detach done),
    not at once as from the teardown itself.
    """
    store = SlowDetach()
    heard: list[list[str]] = []

    async def close(old: retinue.Agent) -> None:
        await (old.dispose() if verb == "dispose" else rt.aclose())
        heard.append(list(store.detached))

    async with runtime(ScriptedModel([Reply("ok")]), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="a")
        await agent.ask("one")
        await _start_on_disposal(rt, agent, close)
        assert heard == [["a"]]


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
async def test_an_agent_waiting_on_a_teardown_a_started_task_asks_it_of_is_no_circle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.30, R12.9: a task a disposed listener of A starts elsewhere asks B, whose tool waits
    for A's end. A's teardown does not wait for that task, so the ask is no wait of A's and
    B's wait closes no circle: it returns once A is torn down.
    """
    store = SlowDetach()
    agents: dict[str, retinue.Agent] = {}
    heard: list[str] = []

    @retinue.tool
    async def wait_for_a() -> str:
        """Wait until agent a has ended."""
        try:
            await agents["a"].wait_idle()
        except retinue.AgentError as exc:
            heard.append(str(exc.code))
            raise
        heard.append(agents["a"].status)
        return "ended"

    async def ask_b(_old: retinue.Agent) -> None:
        heard.append((await agents["b"].ask("wait for a")).reason.kind)

    model = ScriptedModel(
        {
            "a": [Reply("ok")],
            "b": [CallTools([ToolCallSpec("wait_for_a", "{}", id="w")]), Reply("done")],
        }
    )
    async with runtime(model, store=store, tools=[wait_for_a]) as rt:
        for name in ("a", "b"):
            options = retinue.AgentOptions(model=name)
            agents[name] = await rt.create_agent(name, options, session_id=name)
        await agents["a"].ask("one")
        await _start_on_disposal(rt, agents["a"], ask_b)
    assert heard == ["disposed", "completed"]
    assert store.detached[0] == "a"
    assert turn_ends(agents["b"].session.events) == ["completed"]
    check_session_invariants(agents["b"].session.events)


class _DetachCallingInChild(SlowDetach):
    """A store whose detach runs *verb* on the agent from a task of a nursery of its own."""

    def __init__(self, call: Callable[[retinue.Runtime, retinue.Agent], Awaitable[object]]) -> None:
        super().__init__()
        self.call = call
        self.rt: retinue.Runtime | None = None
        self.agents: dict[str, retinue.Agent] = {}
        self.heard: list[str] = []

    async def detach(self, session: Session) -> None:
        async with trio.open_nursery() as own:
            own.start_soon(self._call, self.agents[session.id])
        await super().detach(session)

    async def _call(self, agent: retinue.Agent) -> None:
        assert self.rt is not None
        try:
            await self.call(self.rt, agent)
            self.heard.append("returned")
        except retinue.AgentError as exc:
            self.heard.append(str(exc.code))


async def _resume(rt: retinue.Runtime, agent: retinue.Agent) -> object:
    return await rt.resume_agent(agent.id, OPTIONS)


async def _wait_idle(_rt: retinue.Runtime, agent: retinue.Agent) -> object:
    await agent.wait_idle()
    return agent.status


@pytest.mark.timeout(30)  # a deadlock inside a shield is out of the virtual clock's reach
@pytest.mark.parametrize("call", [_resume, _wait_idle], ids=["resume_agent", "wait_idle"])
async def test_a_task_the_teardown_waits_for_still_cannot_wait_for_it(
    autojump_clock: trio.testing.MockClock,
    call: Callable[[retinue.Runtime, retinue.Agent], Awaitable[object]],
) -> None:
    """R12.9: a task the store's detach runs in a nursery of its own is part of the teardown,
    which waits for it: its ``wait_idle`` or ``resume_agent`` of the id raises
    ``WAITS_FOR_ITSELF`` rather than wait, with no flush bound, forever.
    """
    store = _DetachCallingInChild(call)
    async with runtime(ScriptedModel([Reply("ok")]), store=store, flush_timeout=math.inf) as rt:
        store.rt = rt
        agent = store.agents["a"] = await rt.create_agent("a", OPTIONS, session_id="a")
        await agent.ask("hi")
        await agent.dispose()
        assert store.heard == ["WAITS_FOR_ITSELF"]
        assert store.detached == ["a"]
