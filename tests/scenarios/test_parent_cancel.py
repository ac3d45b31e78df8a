"""An ask made from an agent's tool ends with that agent's turn (SPEC R2.29, the parent cause).

A tool of agent ``orch`` awaiting ``worker.ask(...)`` is the worker's parent for
that prompt. Cancelling ``orch``'s turn, or disposing ``orch``, withdraws the
prompt while it is still queued and aborts the worker's turn once one has taken
it alone, naming the parent; the worker's other prompts stay queued and it goes
on. A turn that took other prompts with it runs on for them. A wait given up on
its own (a deadline), or made in ``orch``'s flush, leaves the worker's turn
running, as an ask from outside any agent does.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, TurnResult
from retinue.session import ToolResultEvent, TurnEnd, UserMessage
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import Next, of_type, runtime

Peers = dict[str, retinue.Agent]


def delegate(peers: Peers, *, patience: float | None = None) -> retinue.Tool:
    """``orch``'s tool: asks the worker, giving up after *patience* seconds if given."""

    @retinue.tool
    async def ask_worker() -> str:
        """Ask the worker."""
        if patience is None:
            return (await peers["worker"].ask("orch asks")).text
        with trio.move_on_after(patience):
            return (await peers["worker"].ask("orch asks")).text
        return "gave up"

    return ask_worker


def calling_orchestrator() -> list[CallTools | Reply]:
    return [CallTools([ToolCallSpec("ask_worker", "{}", id="c1")]), Reply("orch done")]


def turn_ends(agent: retinue.Agent) -> list[str]:
    """How each of *agent*'s turns ended: its kind, and an abort's reason."""
    ends = []
    for event in of_type(agent.session.events, "turn/end"):
        assert isinstance(event.data, TurnEnd)
        reason = event.data.reason
        ends.append(f"aborted: {reason.reason}" if reason.kind == "aborted" else reason.kind)
    return ends


def prompts(agent: retinue.Agent) -> list[str]:
    texts = []
    for event in of_type(agent.session.events, "user/message"):
        assert isinstance(event.data, UserMessage)
        texts.append("".join(getattr(block, "text", "") for block in event.data.content))
    return texts


def worker_calling(tool: str, *, then: str) -> ScriptedModel:
    """``orch`` asks the worker, whose turn calls *tool* once and then answers *then*."""
    return ScriptedModel(
        {
            "orch": calling_orchestrator(),
            "worker": [CallTools([ToolCallSpec(tool, "{}", id="w1")]), Reply(then)],
        }
    )


async def start(rt: retinue.Runtime, peers: Peers) -> None:
    for name in ("orch", "worker"):
        peers[name] = await rt.create_agent(name, AgentOptions(model=name), session_id=name)


async def test_cancelling_the_parent_aborts_the_worker_turn_it_awaits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: ``orch.cancel`` while its tool awaits the worker ends the worker's turn
    ``aborted``, the reason naming the parent and its own reason; the worker goes on."""
    peers: Peers = {}
    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("slow", delay=100), Reply("next")]}
    )
    async with runtime(model, tools=[delegate(peers)]) as rt:
        await start(rt, peers)
        async with trio.open_nursery() as nursery:
            results: list[TurnResult] = []

            async def ask_orch() -> None:
                results.append(await peers["orch"].ask("go"))

            nursery.start_soon(ask_orch)
            await trio.sleep(10)
            assert peers["worker"].status == "running"
            peers["orch"].cancel("user stop")
        assert results[0].reason.kind == "aborted"
        await peers["worker"].wait_idle()
        assert turn_ends(peers["worker"]) == [
            "aborted: parent agent 'orch' was cancelled: user stop"
        ]
        assert (await peers["worker"].ask("again")).text == "next"
        for agent in peers.values():
            check_session_invariants(agent.session.events)


async def test_disposing_the_parent_aborts_the_worker_turn_and_leaves_the_worker(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: disposing ``orch`` mid-ask aborts the worker's turn, naming the disposal;
    the worker is not disposed."""
    peers: Peers = {}
    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("slow", delay=100), Reply("next")]}
    )
    async with runtime(model, tools=[delegate(peers)]) as rt:
        await start(rt, peers)
        peers["orch"].send("go")
        await trio.sleep(10)
        await peers["orch"].dispose()
        await peers["worker"].wait_idle()
        assert turn_ends(peers["worker"]) == ["aborted: parent agent 'orch' was disposed"]
        assert peers["worker"].status == "idle"
        assert (await peers["worker"].ask("again")).text == "next"
        check_session_invariants(peers["worker"].session.events)


async def test_a_queued_ask_of_a_cancelled_parent_is_withdrawn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: while the worker runs another caller's turn, ``orch``'s prompt waits in its
    queue; cancelling ``orch`` withdraws it unrun, and the running turn completes."""
    peers: Peers = {}
    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("busy", delay=100), Reply("later")]}
    )
    async with runtime(model, tools=[delegate(peers)]) as rt:
        await start(rt, peers)
        peers["worker"].send("first")
        await trio.sleep(1)
        peers["orch"].send("go")
        await trio.sleep(10)
        peers["orch"].cancel()
        await peers["worker"].wait_idle()
        await trio.sleep(300)
        assert turn_ends(peers["worker"]) == ["completed"]
        assert prompts(peers["worker"]) == ["first"]
        check_session_invariants(peers["worker"].session.events)


async def test_the_worker_keeps_other_callers_prompts_when_its_parent_turn_is_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: the aborted turn was ``orch``'s alone; a prompt another caller queued
    meanwhile is not discarded (as ``cancel`` would) but runs next."""
    peers: Peers = {}
    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("slow", delay=100), Reply("yours")]}
    )
    async with runtime(model, tools=[delegate(peers)]) as rt:
        await start(rt, peers)
        peers["orch"].send("go")
        await trio.sleep(10)
        async with trio.open_nursery() as nursery:
            results: list[TurnResult] = []

            async def ask_worker() -> None:
                results.append(await peers["worker"].ask("another caller"))

            nursery.start_soon(ask_worker)
            await trio.sleep(1)
            peers["orch"].cancel()
        assert results[0].text == "yours"
        assert turn_ends(peers["worker"]) == [
            "aborted: parent agent 'orch' was cancelled",
            "completed",
        ]
        assert prompts(peers["worker"]) == ["orch asks", "another caller"]


async def test_a_tool_giving_up_on_its_own_leaves_the_worker_turn_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A tool's own deadline is no parent cause: the worker's turn runs to its end, as
    for an ask from outside any agent (README: cancelling the wait does not withdraw)."""
    peers: Peers = {}
    model = ScriptedModel({"orch": calling_orchestrator(), "worker": [Reply("slow", delay=100)]})
    async with runtime(model, tools=[delegate(peers, patience=5)]) as rt:
        await start(rt, peers)
        assert (await peers["orch"].ask("go")).text == "orch done"
        await peers["worker"].wait_idle()
        assert turn_ends(peers["worker"]) == ["completed"]


async def test_the_abort_reaches_a_worker_of_the_worker(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: the worker's own tool asks a helper; cancelling ``orch`` aborts the worker's
    turn, which aborts the helper's, each reason naming its parent's."""
    peers: Peers = {}

    @retinue.tool
    async def ask_helper() -> str:
        """Ask the helper."""
        return (await peers["helper"].ask("worker asks")).text

    model = ScriptedModel(
        {
            "orch": calling_orchestrator(),
            "worker": [CallTools([ToolCallSpec("ask_helper", "{}", id="w1")])],
            "helper": [Reply("slow", delay=100)],
        }
    )
    async with runtime(model, tools=[delegate(peers), ask_helper]) as rt:
        await start(rt, peers)
        peers["helper"] = await rt.create_agent(
            "helper", AgentOptions(model="helper"), session_id="helper"
        )
        peers["orch"].send("go")
        await trio.sleep(10)
        assert peers["helper"].status == "running"
        peers["orch"].cancel("enough")
        await peers["helper"].wait_idle()
        await peers["worker"].wait_idle()
        worker_reason = "parent agent 'orch' was cancelled: enough"
        assert turn_ends(peers["worker"]) == [f"aborted: {worker_reason}"]
        assert turn_ends(peers["helper"]) == [
            f"aborted: parent agent 'worker' was cancelled: {worker_reason}"
        ]
        for agent in peers.values():
            check_session_invariants(agent.session.events)


@pytest.mark.timeout(30)
async def test_a_sync_tool_abandoned_with_its_parent_turn_aborts_the_worker_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: a sync body asks through ``trio.from_thread.run``; cancelling ``orch``
    abandons the body, and the worker's turn it waits on is aborted as for an async one.
    The body runs in a real thread: the clock jumps only after a real second idle."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}

    @retinue.tool(name="ask_worker")
    def ask_in_thread() -> str:
        """Ask the worker from a worker thread."""
        return trio.from_thread.run(peers["worker"].ask, "orch asks").text

    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("slow", delay=100), Reply("next")]}
    )
    async with runtime(model, tools=[ask_in_thread]) as rt:
        await start(rt, peers)
        peers["orch"].send("go")
        await trio.sleep(10)
        peers["orch"].cancel("stop")
        await peers["worker"].wait_idle()
        assert turn_ends(peers["worker"]) == ["aborted: parent agent 'orch' was cancelled: stop"]
        assert (await peers["worker"].ask("again")).text == "next"


def asking(name: str, peers: Peers) -> retinue.Tool:
    """Agent *name*'s tool ``ask_<name>``: asks the worker."""

    @retinue.tool(name=f"ask_{name}")
    async def ask_worker() -> str:
        """Ask the worker."""
        return (await peers["worker"].ask(f"{name} asks")).text

    return ask_worker


async def test_a_worker_turn_shared_with_another_callers_prompt_runs_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: ``a`` and ``b`` ask the busy worker, and their prompts make one turn;
    cancelling ``a`` leaves that turn to answer ``b``."""
    peers: Peers = {}
    model = ScriptedModel(
        {
            "a": [CallTools([ToolCallSpec("ask_a", "{}", id="a")]), Reply("done")],
            "b": [CallTools([ToolCallSpec("ask_b", "{}", id="b")]), Reply("done")],
            "worker": [Reply("busy", delay=10), Reply("for both", delay=30)],
        }
    )
    async with runtime(model, tools=[asking("a", peers), asking("b", peers)]) as rt:
        for name in ("a", "b", "worker"):
            peers[name] = await rt.create_agent(name, AgentOptions(model=name), session_id=name)
        peers["worker"].send("busy")
        await trio.sleep(1)
        peers["a"].send("go")
        peers["b"].send("go")
        await trio.sleep(20)
        assert sorted(prompts(peers["worker"])) == ["a asks", "b asks", "busy"]
        peers["a"].cancel()
        await peers["b"].wait_idle()
        [result] = [event.data for event in of_type(peers["b"].session.events, "tool/result")]
        assert isinstance(result, ToolResultEvent)
        assert "".join(getattr(block, "text", "") for block in result.content) == "for both"
        assert turn_ends(peers["worker"]) == ["completed", "completed"]
        check_session_invariants(peers["b"].session.events)


async def test_a_flush_listener_giving_up_on_its_own_leaves_the_worker_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: after ``orch``'s turn was cancelled, its ``session/flush`` listener asks
    the worker under a deadline of its own; that deadline is no parent cause, and
    the worker's turn runs to its end."""
    peers: Peers = {}
    gave_up: list[bool] = []

    @retinue.tool
    async def slow() -> str:
        """Take a while."""
        await trio.sleep(50)
        return "ok"

    async def summarize(_agent: object, _session: object) -> None:
        with trio.move_on_after(5):
            await peers["worker"].ask("summarize")
        gave_up.append(True)

    model = ScriptedModel(
        {
            "orch": [CallTools([ToolCallSpec("slow", "{}", id="c1")])],
            "worker": [Reply("sum", delay=100)],
        }
    )
    async with runtime(model, tools=[slow]) as rt:
        await start(rt, peers)
        peers["orch"].send("go")
        await trio.sleep(10)
        rt.hooks.on("session/flush", summarize, agent=peers["orch"])
        peers["orch"].cancel("stop")
        await peers["orch"].wait_idle()
        await peers["worker"].wait_idle()
        assert gave_up == [True]
        assert turn_ends(peers["worker"]) == ["completed"]


async def test_steering_of_a_turn_aborted_with_its_parent_goes_with_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29, R2.25: a steer made into the worker's turn for ``orch`` is dropped when that
    turn is aborted with ``orch``, as a cancel drops it, not run as a turn of its own."""
    peers: Peers = {}
    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("slow", delay=30), Reply("next")]}
    )
    async with runtime(model, tools=[delegate(peers)]) as rt:
        await start(rt, peers)
        peers["orch"].send("go")
        await trio.sleep(5)
        peers["worker"].steer("also use metric units")
        await trio.sleep(1)
        peers["orch"].cancel("stop")
        await trio.sleep(100)
        await peers["worker"].wait_idle()
        assert prompts(peers["worker"]) == ["orch asks"]
        assert turn_ends(peers["worker"]) == ["aborted: parent agent 'orch' was cancelled: stop"]


async def test_steering_sent_in_the_worker_s_flush_outlives_a_parent_cancel_then(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29, R3.10: once the worker's turn for ``orch`` has ended (its ``turn/end`` logged,
    its flush still running), cancelling ``orch`` leaves that turn's end as it is and the
    steer sent meanwhile becomes the worker's next prompt, as without the cancel."""
    peers: Peers = {}
    model = ScriptedModel({"orch": calling_orchestrator(), "worker": [Reply("one"), Reply("two")]})
    async with runtime(model, tools=[delegate(peers)]) as rt:
        await start(rt, peers)

        async def slow_flush(_agent: retinue.Agent, _session: retinue.Session) -> None:
            await trio.sleep(10)

        rt.hooks.on("session/flush", slow_flush, agent=peers["worker"])
        peers["orch"].send("go")
        await trio.sleep(5)
        assert (turn_ends(peers["worker"]), peers["worker"].status) == (["completed"], "running")
        peers["worker"].steer("late steer")
        peers["orch"].cancel("user stop")
        await trio.sleep(30)
        await peers["worker"].wait_idle()
        assert prompts(peers["worker"]) == ["orch asks", "late steer"]
        assert turn_ends(peers["worker"]) == ["completed", "completed"]
        for agent in peers.values():
            check_session_invariants(agent.session.events)


async def test_wait_idle_ends_when_the_only_queued_ask_is_withdrawn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29, R2.32: ``orch``'s ask wakes the idle worker, a ``wait_idle`` starts, and
    ``orch`` is cancelled, all at one instant, in whatever order trio runs them:
    when the withdrawal leaves the worker nothing to run, the wait ends."""
    for _ in range(60):
        await _ask_wait_and_cancel_at_once()


async def _ask_wait_and_cancel_at_once() -> None:
    peers: Peers = {}
    moment = trio.current_time() + 5

    @retinue.tool(name="ask_worker")
    async def ask_at_the_moment() -> str:
        """Ask the worker at the agreed instant."""
        await trio.sleep_until(moment)
        return (await peers["worker"].ask("orch asks")).text

    async def wait_for_worker() -> None:
        await trio.sleep_until(moment)
        with trio.fail_after(100):
            await peers["worker"].wait_idle()

    async def cancel_orch() -> None:
        await trio.sleep_until(moment)
        peers["orch"].cancel("stop")

    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("slow", delay=30)]}, repeat_last=True
    )
    async with runtime(model, tools=[ask_at_the_moment]) as rt:
        await start(rt, peers)
        peers["orch"].send("go")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_for_worker)
            nursery.start_soon(cancel_orch)


async def test_the_workers_own_cancel_reason_wins_over_a_later_parent_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.23 "the first cause wins": the worker's turn for ``orch`` was cancelled on its
    own first, and is still unwinding (a tool's shielded cleanup) when ``orch`` is
    cancelled: the later parent cause does not rename why the turn ended."""
    peers: Peers = {}

    @retinue.tool
    async def stubborn() -> str:
        """Finish a shielded piece of work even when cancelled."""
        try:
            await trio.sleep(100)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(5)
        return "ok"

    model = worker_calling("stubborn", then="next")
    async with runtime(model, tools=[delegate(peers), stubborn]) as rt:
        await start(rt, peers)
        peers["orch"].send("go")
        await trio.sleep(10)
        assert peers["worker"].status == "running"
        peers["worker"].cancel("worker's own")
        await trio.sleep(1)  # the worker's tool is in its shielded cleanup
        peers["orch"].cancel("stop")
        await peers["worker"].wait_idle()
        await peers["orch"].wait_idle()
        assert turn_ends(peers["worker"]) == ["aborted: worker's own"]


async def test_withdrawing_a_queued_ask_does_not_end_a_wait_idle_on_a_running_worker(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29, R2.32: the worker runs another caller's turn while ``orch``'s ask waits
    queued; withdrawing that ask leaves the queue empty, but the worker still runs:
    a ``wait_idle`` made meanwhile ends only with that turn."""
    peers: Peers = {}
    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("busy", delay=100), Reply("later")]}
    )
    async with runtime(model, tools=[delegate(peers)]) as rt:
        await start(rt, peers)
        peers["worker"].send("first")
        await trio.sleep(1)
        peers["orch"].send("go")
        await trio.sleep(10)
        idle_at: list[float] = []

        async def wait_for_worker() -> None:
            await peers["worker"].wait_idle()
            idle_at.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_for_worker)
            await trio.sleep(1)
            started = trio.current_time()
            peers["orch"].cancel()
        assert peers["worker"].status == "idle"
        assert idle_at[0] - started > 50  # the "busy" turn still had ~89 s to run
        assert turn_ends(peers["worker"]) == ["completed"]


@pytest.mark.timeout(30)
async def test_a_sync_tools_withdrawn_ask_is_answered_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: a sync body's ask waits queued behind another caller's turn; cancelling
    ``orch`` abandons the body and withdraws the prompt, which is answered ``aborted``
    naming the parent: the body's thread gets its answer rather than waiting for good."""
    autojump_clock.autojump_threshold = 1.0
    peers: Peers = {}
    answers: list[TurnResult] = []
    returned = trio.Event()
    token = trio.lowlevel.current_trio_token()

    @retinue.tool(name="ask_worker")
    def ask_in_thread() -> str:
        """Ask the worker from a worker thread."""
        result = trio.from_thread.run(peers["worker"].ask, "orch asks")
        answers.append(result)
        trio.from_thread.run_sync(returned.set, trio_token=token)
        return result.text

    model = ScriptedModel(
        {"orch": calling_orchestrator(), "worker": [Reply("busy", delay=100), Reply("later")]}
    )
    async with runtime(model, tools=[ask_in_thread]) as rt:
        await start(rt, peers)
        peers["worker"].send("first")
        await trio.sleep(1)
        peers["orch"].send("go")
        await trio.sleep(10)
        peers["orch"].cancel("stop")
        with trio.fail_after(50):  # virtual: well before the "busy" turn ends
            await returned.wait()
        assert answers[0].reason.kind == "aborted"
        assert answers[0].reason.reason == "parent agent 'orch' was cancelled: stop"
        await peers["worker"].wait_idle()
        assert prompts(peers["worker"]) == ["first"]


async def test_a_parent_cancel_during_the_workers_tool_ends_the_workers_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29: ``orch`` is cancelled while the worker's turn runs a tool; the worker's
    turn ends aborted after that tool, without another model step."""
    peers: Peers = {}

    @retinue.tool
    async def slow() -> str:
        """Take a while."""
        await trio.sleep(50)
        return "ok"

    model = worker_calling("slow", then="after tool")
    async with runtime(model, tools=[delegate(peers), slow]) as rt:
        await start(rt, peers)
        peers["orch"].send("go")
        await trio.sleep(10)
        peers["orch"].cancel("stop")
        await peers["orch"].wait_idle()
        await peers["worker"].wait_idle()
        assert turn_ends(peers["worker"]) == ["aborted: parent agent 'orch' was cancelled: stop"]


async def test_a_parent_cancel_between_the_workers_steps_ends_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.29, R2.24: ``orch`` is cancelled while the worker's turn is between steps (its
    ``agent/turn-continuation`` listener awaits, no step window open): as a cancel there
    does, the parent cause interrupts the listener and ends the turn at once, before
    another model step."""
    peers: Peers = {}

    @retinue.tool
    async def quick() -> str:
        """Return at once."""
        return "ok"

    async def pondering(_agent: retinue.Agent, _turn: int, _default: object, next_: Next) -> Any:
        await trio.sleep(50)
        return await next_()

    model = worker_calling("quick", then="after tool")
    async with runtime(model, tools=[delegate(peers), quick]) as rt:
        await start(rt, peers)
        rt.hooks.on("agent/turn-continuation", pondering, agent=peers["worker"])
        peers["orch"].send("go")
        await trio.sleep(10)
        cancelled_at = trio.current_time()
        peers["orch"].cancel("stop")
        await peers["orch"].wait_idle()
        await peers["worker"].wait_idle()
        assert trio.current_time() - cancelled_at < 1
        assert turn_ends(peers["worker"]) == ["aborted: parent agent 'orch' was cancelled: stop"]
        assert len(of_type(peers["worker"].session.events, "step/start")) == 1
