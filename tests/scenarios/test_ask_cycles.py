"""Agents waiting on each other from their tools.

No SPEC rule covers refusing such waits; the README documents it ("Agents may ask
each other from their tools"), as do ``Agent.ask`` and ``Agent.wait_idle``.

A tool of agent X that awaits ``Y.ask`` or ``Y.wait_idle`` keeps X's turn open
until Y answers. If Y, directly or through other agents, is itself waiting on
X, nobody can answer: the wait that would close that circle raises
``WAIT_CYCLE`` instead, which its tool call reports, and every turn goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, Allow, Block
from retinue.session import Event, ToolResultEvent
from retinue.testing import (
    CallTools,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import Next, of_type, runtime, texts

Peers = dict[str, retinue.Agent]
PromptListener = Callable[
    [retinue.Agent, Sequence[object], object, Next], Coroutine[Any, Any, Allow | Block]
]


def consult(me: str, peer: str, peers: Peers, verb: str = "ask") -> retinue.Tool:
    """A tool of agent *me* that waits on agent *peer* with *verb*."""

    @retinue.tool(name=f"consult_{me}")
    async def consult_peer() -> str:
        """Consult the peer."""
        if verb == "wait_idle":
            await peers[peer].wait_idle()
            return f"{peer} is idle"
        return (await peers[peer].ask(f"{me} asks")).text

    return consult_peer


def calls_then_replies(name: str) -> list[CallTools | Reply]:
    """One step calling the agent's consult tool, then plain replies from then on."""
    return [
        CallTools([ToolCallSpec(f"consult_{name}", "{}", id=f"c{name}")]),
        Reply(f"{name} done"),
    ]


def tool_results(events: Sequence[Event]) -> list[ToolResultEvent]:
    results = [event.data for event in of_type(events, "tool/result")]
    assert all(isinstance(result, ToolResultEvent) for result in results)
    return results  # type: ignore[return-value]


def circle(peers: Peers, names: str) -> str:
    """How a refusal names the circle of agents *names* (ids, in waiting order)."""
    return " -> ".join(repr(peers[name].id) for name in names)


def codes(agent: retinue.Agent) -> list[str | None]:
    return [r.error.code if r.error else None for r in tool_results(agent.session.events)]


async def test_two_agents_asking_each_other_from_their_tools_do_not_wait_forever(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A circle of waits is refused: a's tool asks b while b's tool asks a; the second ask
    closes the circle and raises ``WAIT_CYCLE`` naming both agents, so both turns end.
    """
    peers: Peers = {}
    model = ScriptedModel(
        {"a": calls_then_replies("a"), "b": calls_then_replies("b")}, repeat_last=True
    )
    tools = [consult("a", "b", peers), consult("b", "a", peers)]
    async with runtime(model, tools=tools) as rt:
        peers["a"] = await rt.create_agent("a", AgentOptions(model="a"))
        peers["b"] = await rt.create_agent("b", AgentOptions(model="b"))
        peers["a"].send("go")
        peers["b"].send("go")
        with trio.fail_after(60):
            await peers["a"].wait_idle()
            await peers["b"].wait_idle()
        assert codes(peers["a"]) == [None]
        refused = tool_results(peers["b"].session.events)[0]
        assert refused.error is not None
        assert refused.error.code == "WAIT_CYCLE"
        assert circle(peers, "bab") in texts(refused.content)
        for agent in peers.values():
            assert agent.status == "idle"
            check_session_invariants(agent.session.events)


async def test_a_circle_through_three_agents_is_refused_for_wait_idle_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A circle of waits is refused for ``wait_idle`` too: a asks b, b asks c, and c's tool
    waits for a to go idle: the circle a -> b -> c -> a is refused at c's ``wait_idle``,
    and the whole chain answers.
    """
    peers: Peers = {}
    model = ScriptedModel({name: calls_then_replies(name) for name in "abc"}, repeat_last=True)
    tools = [
        consult("a", "b", peers),
        consult("b", "c", peers),
        consult("c", "a", peers, verb="wait_idle"),
    ]
    async with runtime(model, tools=tools) as rt:
        for name in "abc":
            peers[name] = await rt.create_agent(name, AgentOptions(model=name))
        with trio.fail_after(60):
            result = await peers["a"].ask("go")
        assert result.text == "a done"
        assert codes(peers["a"]) == codes(peers["b"]) == [None]
        (refused,) = tool_results(peers["c"].session.events)
        assert refused.error is not None
        assert refused.error.code == "WAIT_CYCLE"
        assert circle(peers, "cabc") in texts(refused.content)


async def test_a_chain_of_agents_asking_each_other_without_a_circle_is_served(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.32: waits that form no circle are never refused: a asks b, b asks c, c answers."""
    peers: Peers = {}
    model = ScriptedModel(
        {"a": calls_then_replies("a"), "b": calls_then_replies("b"), "c": [Reply("c done")]},
        repeat_last=True,
    )
    async with runtime(model, tools=[consult("a", "b", peers), consult("b", "c", peers)]) as rt:
        for name in "abc":
            peers[name] = await rt.create_agent(name, AgentOptions(model=name))
        with trio.fail_after(60):
            assert (await peers["a"].ask("go")).text == "a done"
        assert texts(tool_results(peers["b"].session.events)[0].content) == "c done"
        assert codes(peers["a"]) == codes(peers["b"]) == [None]


@pytest.mark.parametrize("ending", ["cancel", "timeout"])
async def test_a_wait_that_ended_no_longer_counts_toward_a_circle(
    autojump_clock: trio.testing.MockClock, ending: str
) -> None:
    """R2.23, R2.32: once a's wait on b is cancelled (a's turn aborted, or the tool's own
    timeout), a no longer waits on b, and b's tool may then ask a.
    """
    peers: Peers = {}

    @retinue.tool(name="consult_a")
    async def consult_a() -> str:
        """Consult b, giving up after a while."""
        with trio.move_on_after(10):
            return (await peers["b"].ask("a asks")).text
        return "b took too long"

    model = ScriptedModel(
        {
            "a": [CallTools([ToolCallSpec("consult_a", "{}", id="ca")]), Reply("a done")],
            "b": [Hang("thinking"), *calls_then_replies("b")],
        },
        repeat_last=True,
    )
    async with runtime(model, tools=[consult_a, consult("b", "a", peers)]) as rt:
        peers["a"] = await rt.create_agent("a", AgentOptions(model="a"))
        peers["b"] = await rt.create_agent("b", AgentOptions(model="b"))
        peers["b"].send("hang")
        await trio.sleep(1)
        peers["a"].send("go")
        await trio.sleep(1 if ending == "cancel" else 20)
        if ending == "cancel":
            peers["a"].cancel("enough")
        with trio.fail_after(60):
            await peers["a"].wait_idle()
            peers["b"].cancel("enough")
            await peers["b"].wait_idle()
            result = await peers["b"].ask("go")
        assert result.text == "b done"
        assert codes(peers["b"]) == [None]
        assert texts(tool_results(peers["b"].session.events)[0].content) == "a done"


def asking_a_at_q2(peers: Peers, outcomes: list[str]) -> PromptListener:
    """A prompt-submit listener of b that asks a on the prompt ``q2``, noting a's answer."""

    async def ask_a(
        _agent: retinue.Agent, content: Sequence[object], _source: object, next_: Next
    ) -> Allow | Block:
        if texts(content) == "q2":
            outcomes.append((await peers["a"].ask("from b's listener")).text)
        decision: Allow | Block = await next_()
        return decision

    return ask_a


async def test_an_answered_ask_no_longer_counts_toward_a_circle_before_its_asker_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Once b has answered a's ask, a waits on b no more, though a's task has not run
    since: b's next turn may ask a (here from its prompt-submit listener), however trio
    orders the tasks it wakes together. Repeated, as that order is random."""
    peers: Peers = {}
    outcomes: list[str] = []

    ask_a = asking_a_at_q2(peers, outcomes)
    for _ in range(20):
        model = ScriptedModel(
            {
                "a": [*calls_then_replies("a"), Reply("a answers")],
                "b": [Reply("b on q1", delay=1), Reply("b on q2")],
            }
        )
        async with runtime(model, tools=[consult("a", "b", peers)]) as rt:
            peers["a"] = await rt.create_agent("a", AgentOptions(model="a"))
            peers["b"] = await rt.create_agent("b", AgentOptions(model="b"))
            rt.hooks.on("agent/prompt-submit", ask_a, agent=peers["b"])
            peers["a"].send("go")
            await trio.sleep(0.5)
            peers["b"].send("q2")
            with trio.fail_after(60):
                await peers["b"].wait_idle()
                await peers["a"].wait_idle()
            for agent in peers.values():
                check_session_invariants(agent.session.events)
    assert outcomes == ["a answers"] * 20


async def test_a_released_wait_idle_no_longer_counts_toward_a_circle_before_its_caller_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As an answered ask: once b goes idle, a's tool waiting in ``b.wait_idle()`` waits on
    b no more, though a's task has not run since, so a prompt sent to b as it goes idle may
    ask a from b's prompt-submit listener. Repeated, as trio's order of woken tasks is random."""
    peers: Peers = {}
    outcomes: list[str] = []

    ask_a = asking_a_at_q2(peers, outcomes)

    def send_q2_once_idle(agent: retinue.Agent, status: str) -> None:
        if status == "idle" and agent.session.last_turn == 1:
            agent.send("q2")

    for _ in range(20):
        model = ScriptedModel(
            {
                "a": [*calls_then_replies("a"), Reply("a answers")],
                "b": [Reply("b on q1", delay=1), Reply("b on q2")],
            }
        )
        async with runtime(model, tools=[consult("a", "b", peers, verb="wait_idle")]) as rt:
            peers["a"] = await rt.create_agent("a", AgentOptions(model="a"))
            peers["b"] = await rt.create_agent("b", AgentOptions(model="b"))
            rt.hooks.on("agent/prompt-submit", ask_a, agent=peers["b"])
            rt.hooks.on("agent/status", send_q2_once_idle, agent=peers["b"])
            peers["b"].send("q1")
            await trio.sleep(0.1)
            peers["a"].send("go")
            with trio.fail_after(60):
                await trio.sleep(5)
                await peers["b"].wait_idle()
                await peers["a"].wait_idle()
            for agent in peers.values():
                check_session_invariants(agent.session.events)
    assert outcomes == ["a answers"] * 20
