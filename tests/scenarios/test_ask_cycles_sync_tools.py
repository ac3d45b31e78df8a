"""Sync tool bodies waiting on agents through ``trio.from_thread``, as async bodies do.

A sync body runs in a worker thread, and reaches an agent's ``ask`` or
``wait_idle`` with ``trio.from_thread.run``, which runs it in a system task
outside the tool call's task tree. The body blocks until that task returns, so
its call (and its agent's turn) waits as an async body's would: a wait on its
own agent, or one that closes a circle of agents, is refused as it is for an
async body, rather than left to wait forever.

Bodies run in real threads: the virtual clock jumps only after a real second
idle, so a thread at work is never taken for a deadlock, and a real one fails
at the runtime's virtual deadline.
"""

from __future__ import annotations

import threading

import pytest
import trio
import trio.lowlevel
import trio.testing

import retinue
from retinue import AgentOptions
from retinue.session import ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import of_type, runtime, texts

pytestmark = pytest.mark.timeout(30)

Peers = dict[str, retinue.Agent]


def consult_in_thread(me: str, peer: str, peers: Peers, verb: str = "ask") -> retinue.Tool:
    """A sync tool of agent *me* that waits on agent *peer* with *verb*, from its thread."""

    @retinue.tool(name=f"consult_{me}")
    def consult_peer() -> str:
        """Consult the peer."""
        target = peers[peer]
        if verb == "wait_idle":
            trio.from_thread.run(target.wait_idle)
            return f"{peer} is idle"
        return trio.from_thread.run(target.ask, f"{me} asks").text

    return consult_peer


def script(name: str) -> list[CallTools | Reply]:
    return [
        CallTools([ToolCallSpec(f"consult_{name}", "{}", id=f"c{name}")]),
        Reply(f"{name} done"),
    ]


def tool_results(agent: retinue.Agent) -> list[ToolResultEvent]:
    results = [event.data for event in of_type(agent.session.events, "tool/result")]
    assert all(isinstance(result, ToolResultEvent) for result in results)
    return results  # type: ignore[return-value]


def result_texts(agent: retinue.Agent) -> list[str]:
    return [texts(result.content) for result in tool_results(agent)]


def refusal_code(agent: retinue.Agent) -> str | None:
    (result,) = tool_results(agent)
    return result.error.code if result.error else None


@pytest.mark.parametrize("verb", ["ask", "wait_idle"])
async def test_a_sync_tool_waiting_on_its_own_agent_gets_a_typed_error(
    verb: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A sync body's ``ask`` or ``wait_idle`` of its own agent raises ``WAITS_FOR_ITSELF``
    in its thread, as an async body's does, and the turn goes on to its answer."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    model = ScriptedModel(script("a"), repeat_last=True)
    async with runtime(model, tools=[consult_in_thread("a", "a", peers, verb)]) as rt:
        peers["a"] = agent = await rt.create_agent("a", AgentOptions(model="a"))
        result = await agent.ask("go")
        assert result.text == "a done"
        assert refusal_code(agent) == "WAITS_FOR_ITSELF"
        check_session_invariants(agent.session.events)


async def test_two_agents_whose_sync_tools_ask_each_other_do_not_wait_forever(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """a's sync tool asks b while b's sync tool asks a: the ask closing the circle raises
    ``WAIT_CYCLE`` in b's thread, naming both agents, and both turns end."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    model = ScriptedModel({"a": script("a"), "b": script("b")}, repeat_last=True)
    tools = [consult_in_thread("a", "b", peers), consult_in_thread("b", "a", peers)]
    async with runtime(model, tools=tools) as rt:
        for name in "ab":
            peers[name] = await rt.create_agent(name, AgentOptions(model=name))
        result = await peers["a"].ask("go")
        assert result.text == "a done"
        assert result_texts(peers["a"]) == ["b done"]
        assert refusal_code(peers["b"]) == "WAIT_CYCLE"
        (refusal,) = result_texts(peers["b"])
        assert f"{peers['b'].id!r} -> {peers['a'].id!r} -> {peers['b'].id!r}" in refusal
        for agent in peers.values():
            check_session_invariants(agent.session.events)


async def test_a_sync_tool_asking_another_agent_outside_any_circle_is_served(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.32: a sync body's wait that closes no circle is served: a's tool asks b, b answers."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    model = ScriptedModel({"a": script("a"), "b": [Reply("b done")]}, repeat_last=True)
    async with runtime(model, tools=[consult_in_thread("a", "b", peers)]) as rt:
        for name in "ab":
            peers[name] = await rt.create_agent(name, AgentOptions(model=name))
        result = await peers["a"].ask("go")
        assert result.text == "a done"
        assert result_texts(peers["a"]) == ["b done"]


async def test_a_sync_tool_wait_stops_counting_once_its_call_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A sync body abandoned by its agent's cancel still waits in its thread, but its agent
    no longer does: a's body asks b, a is cancelled, and b's tool then asks a, now idle,
    which answers; the stale wait closing a circle a -> b -> a would refuse it."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    gate = trio.Event()

    @retinue.tool(name="consult_b")
    async def hold_then_ask_a() -> str:
        """Wait for the gate, then ask a."""
        await gate.wait()
        return (await peers["a"].ask("b asks")).text

    model = ScriptedModel(
        {
            "a": [CallTools([ToolCallSpec("consult_a", "{}")]), Reply("a answers b")],
            "b": [CallTools([ToolCallSpec("consult_b", "{}")]), Reply("b done"), Reply("b")],
        }
    )
    tools = [consult_in_thread("a", "b", peers), hold_then_ask_a]
    async with runtime(model, tools=tools) as rt:
        for name in "ab":
            peers[name] = await rt.create_agent(name, AgentOptions(model=name))
        peers["b"].send("hold")
        asked = trio.Event()
        rt.hooks.on("agent/queued", lambda *_: asked.set(), agent=peers["b"])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peers["a"].ask, "go")
            await asked.wait()  # a's body waits on b in its thread
            peers["a"].cancel("enough")
            await peers["a"].wait_idle()
            gate.set()
            await peers["b"].wait_idle()
        assert result_texts(peers["b"]) == ["a answers b"]
        for agent in peers.values():
            check_session_invariants(agent.session.events)


async def test_a_sync_tool_asking_its_own_agent_from_a_child_task_gets_a_typed_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The function a sync body runs through ``trio.from_thread.run`` may ask from a task of a
    nursery it opens: that ask is the agent's own wait too, and is refused, not left counted for
    nobody to wait forever."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    answers: list[str] = []

    async def ask_from_a_child() -> None:
        async def child() -> None:
            try:
                await peers["a"].ask("a asks itself")
            except retinue.AgentError as error:
                answers.append(str(error.code))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)

    @retinue.tool(name="consult_a")
    def consult() -> str:
        """Ask from a child task."""
        trio.from_thread.run(ask_from_a_child)
        return "asked"

    model = ScriptedModel(script("a"), repeat_last=True)
    async with runtime(model, tools=[consult]) as rt:
        peers["a"] = agent = await rt.create_agent("a", AgentOptions(model="a"))
        result = await agent.ask("go")
    assert (result.text, answers) == ("a done", ["WAITS_FOR_ITSELF"])


async def test_a_sync_tool_dispose_stops_counting_once_its_call_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A sync body that disposes b waits for b's teardown in its thread; once its agent a is
    cancelled, a no longer waits on b: b's shielded tool then asks the idle a, which answers. A
    stale wait would make that ask a circle b -> a -> b, refused as WAIT_CYCLE."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    gate, disposing = trio.Event(), trio.Event()
    answers: list[str] = []

    async def dispose_b() -> None:
        disposing.set()
        await peers["b"].dispose()

    @retinue.tool(name="consult_a")
    def dispose_in_thread() -> str:
        """Dispose b."""
        trio.from_thread.run(dispose_b)
        return "disposed b"

    @retinue.tool(name="consult_b")
    async def hold_then_ask_a() -> str:
        """Wait for the gate, shielded, then ask a."""
        with trio.CancelScope(shield=True):
            await gate.wait()
            answers.append((await peers["a"].ask("b asks")).text)
        return "asked"

    model = ScriptedModel(
        {
            "a": [CallTools([ToolCallSpec("consult_a", "{}")]), Reply("a answers b")],
            "b": [CallTools([ToolCallSpec("consult_b", "{}")]), Reply("b done")],
        }
    )
    async with runtime(model, tools=[dispose_in_thread, hold_then_ask_a]) as rt:
        for name in "ab":
            peers[name] = await rt.create_agent(name, AgentOptions(model=name))
        peers["b"].send("hold")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peers["a"].ask, "go")
            await disposing.wait()  # a's body now waits for b's teardown in its thread
            await trio.lowlevel.checkpoint()
            peers["a"].cancel("enough")
            await peers["a"].wait_idle()
            gate.set()
            await peers["b"].dispose()
        assert answers == ["a answers b"]
        for agent in peers.values():
            check_session_invariants(agent.session.events)


async def test_a_sync_body_abandoned_at_its_timeout_may_ask_its_agent_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A sync body that outlived its timeout no longer holds its agent's turn: its later
    ``ask`` of that agent is served by the next turn, not refused as ``WAITS_FOR_ITSELF``."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    release, answered = threading.Event(), trio.Event()
    answers: list[str] = []

    @retinue.tool(name="slow", timeout=5)
    def slow() -> str:
        """Outlive the timeout, then ask a."""
        release.wait(30)
        answers.append(trio.from_thread.run(peers["a"].ask, "late").reason.kind)
        trio.from_thread.run_sync(answered.set)
        return "too late"

    model = ScriptedModel(
        {"a": [CallTools([ToolCallSpec("slow", "{}")]), Reply("timed out"), Reply("late")]}
    )
    async with runtime(model, tools=[slow]) as rt:
        peers["a"] = agent = await rt.create_agent("a", AgentOptions(model="a"))
        result = await agent.ask("go")
        assert (result.text, refusal_code(agent)) == ("timed out", "TOOL_TIMEOUT")
        release.set()
        await answered.wait()
    assert answers == ["completed"]


async def test_a_task_an_async_tool_starts_outside_its_call_asks_as_nobody_s_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A task an async body starts in a nursery of the test's (outside its call) is no part
    of the call: its ``ask`` of the agent waits for the next turn and is answered."""
    peers: Peers = {}
    answers: list[str] = []

    async def ask_later() -> None:
        answers.append((await peers["a"].ask("from outside")).text)

    async with trio.open_nursery() as outside:

        @retinue.tool(name="spawn")
        async def spawn() -> str:
            """Start a task outside the call."""
            outside.start_soon(ask_later)
            await trio.sleep(1)  # the task asks while the call lasts
            return "spawned"

        model = ScriptedModel(
            {"a": [CallTools([ToolCallSpec("spawn", "{}")]), Reply("t1"), Reply("t2")]}
        )
        async with runtime(model, tools=[spawn]) as rt:
            peers["a"] = agent = await rt.create_agent("a", AgentOptions(model="a"))
            assert (await agent.ask("go")).text == "t1"
            await agent.wait_idle()
    assert answers == ["t2"]


async def test_a_sync_tool_s_own_trio_run_asking_its_agent_is_refused_as_another_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A sync body that starts a ``trio.run`` of its own and asks its agent there is refused as a
    caller from another run (``RuntimeError``), before any wait is judged: its thread's call mark
    must not reach that run and have the ask refused as the agent waiting for itself, which it is
    not."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    refusals: list[str] = []

    async def ask_own_agent() -> None:
        await peers["a"].ask("from the body's own run")

    @retinue.tool(name="consult_a")
    def consult() -> str:
        """Ask in a trio run of its own."""
        try:
            trio.run(ask_own_agent)
        except RuntimeError as error:
            refusals.append(type(error).__name__ + ": " + str(error))
        return "asked"

    model = ScriptedModel(script("a"), repeat_last=True)
    async with runtime(model, tools=[consult]) as rt:
        peers["a"] = agent = await rt.create_agent("a", AgentOptions(model="a"))
        result = await agent.ask("go")
    assert result.text == "a done"
    (refusal,) = refusals
    assert refusal.startswith("RuntimeError: ")
    assert "not from another trio.run" in refusal
