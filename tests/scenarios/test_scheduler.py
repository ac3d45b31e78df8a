"""The per-step parallel tool scheduler end to end: grouping, commit order, the cap, ordered
stages and contexts (SPEC 9.3; T-S1..T-S4; DESIGN 4 and 5).

Every tool here is async (under autojump a worker thread would let virtual time
race ahead) and records, in a :class:`Probe`, when its body starts and ends and
how many bodies of its agent are in flight. Orderings are forced with virtual
sleeps of distinct lengths, never with wake-up order.
"""

from __future__ import annotations

import contextvars
import itertools
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Accept, AgentOptions, Deny, HookContext, MessageSource, Text, ToolResultBlock
from retinue.session import ToolCallEvent, ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import ToolExecution, ToolExecutionResult
from tests.helpers import DEADLINE, OPTIONS, Next, of_type, runtime, turn_ends
from tests.scenarios._scheduler_kit import (
    Probe,
    call_seq,
    check_pairing,
    result_ids,
    results,
    spec,
    timed_tool,
)

# -- T-S1: grouping ----------------------------------------------------------------------------


async def test_scheduler_safe_siblings_all_start_before_any_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S1 / R9.12, R9.14: consecutive parallel-safe calls form one group; every body starts before any ends."""
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel(
        [
            CallTools([spec("read", "a", 3), spec("read", "b", 1), spec("read", "c", 2)]),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        assert max(probe.starts.values()) < min(probe.ends.values())
        assert probe.max_peak() == 3
        assert result_ids(agent.session.events) == ["a", "b", "c"]
        check_pairing(agent.session.events)


async def test_scheduler_exclusive_call_in_the_middle_makes_three_groups(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S1 / R9.12: [read, read, write, read, read] runs as three groups, one after another."""
    probe = Probe()
    read, write = timed_tool("read", probe), timed_tool("write", probe, safe=False)
    model = ScriptedModel(
        [
            CallTools(
                [
                    spec("read", "r1", 2),
                    spec("read", "r2", 1),
                    spec("write", "w", 1),
                    spec("read", "r3", 1),
                    spec("read", "r4", 2),
                ]
            ),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[read, write]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
        s, e = probe.starts, probe.ends
        assert max(s["r1"], s["r2"]) < min(e["r1"], e["r2"]), "first group overlaps"
        assert s["w"] >= max(e["r1"], e["r2"]), "the barrier waits for the whole first group"
        assert probe.overlap_at_start["w"] == 1, "the exclusive call runs alone"
        assert min(s["r3"], s["r4"]) >= e["w"], "the third group waits for the barrier"
        assert max(s["r3"], s["r4"]) < min(e["r3"], e["r4"]), "third group overlaps"
        assert result_ids(agent.session.events) == ["r1", "r2", "w", "r3", "r4"]
        check_pairing(agent.session.events)


async def test_scheduler_reclassifies_calls_after_a_barrier_replaced_their_tool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S1 [HEAD] / R9.13: calls after an exclusive call are classified after it ran.

    The exclusive ``swap`` call re-registers ``work`` as exclusive for this agent
    (exclusive tools may mutate the registry, R9.9); the two ``work`` calls that
    follow were parallel-safe when the step began but must now run one at a time.
    """
    probe = Probe()
    work = timed_tool("work", probe)
    strict_work = timed_tool("work", probe, safe=False)
    holder: dict[str, retinue.Agent] = {}

    async def swap() -> str:
        """Replace the work tool with an exclusive one for this agent."""
        await trio.lowlevel.checkpoint()
        rt.tools.add(strict_work, agent=holder["agent"])
        return "swapped"

    model = ScriptedModel(
        [
            CallTools(
                [
                    ToolCallSpec("swap", "{}", id="s"),
                    spec("work", "w1", 2),
                    spec("work", "w2", 1),
                ]
            ),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[work, retinue.tool(swap)]) as rt:
        agent = holder["agent"] = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert probe.max_peak() == 1
        assert probe.starts["w2"] >= probe.ends["w1"]
        assert result_ids(agent.session.events) == ["s", "w1", "w2"]
        check_pairing(agent.session.events)


async def test_scheduler_stops_replenishing_when_the_next_call_became_exclusive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S1 [HEAD] / R9.13: before starting each further call of a group its mode is re-read.

    A ``tools/pre-execute`` listener re-registers ``late`` as exclusive while the
    second call of a parallel group is being prepared. The third call (``late``)
    must not join the running pool: the pool drains, then ``late`` runs alone.
    """
    probe = Probe()
    early, late = timed_tool("early", probe), timed_tool("late", probe)
    strict_late = timed_tool("late", probe, safe=False)
    holder: dict[str, retinue.Agent] = {}

    async def swap_on_second(execution: ToolExecution, next_: Next) -> Any:
        if execution.call_id == "e2":
            rt.tools.add(strict_late, agent=holder["agent"])
        return await next_()

    model = ScriptedModel(
        [
            CallTools([spec("early", "e1", 1), spec("early", "e2", 3), spec("late", "l", 1)]),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[early, late]) as rt:
        agent = holder["agent"] = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/pre-execute", swap_on_second, agent=agent)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert probe.overlap_at_start["l"] == 1, "the now-exclusive call ran alone"
        assert probe.starts["l"] >= max(probe.ends["e1"], probe.ends["e2"])
        assert result_ids(agent.session.events) == ["e1", "e2", "l"]
        check_pairing(agent.session.events)


async def test_scheduler_classifies_each_call_once_just_before_it_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S1 [HEAD] / R9.13: classification is lazy: each call is classified once, in model order.

    The classifier records how many ``tool/call`` events were logged when it ran:
    call k is classified after the first k calls started and before its own.
    """
    probe = Probe()
    logged: list[tuple[str, int]] = []
    holder: dict[str, retinue.Agent] = {}

    def classify(arguments: Any) -> bool:
        calls = of_type(holder["agent"].session.events, "tool/call")
        logged.append((arguments["label"], len(calls)))
        return True

    work = timed_tool("work", probe, safe=classify)
    model = ScriptedModel(
        [
            CallTools([spec("work", "w1", 3), spec("work", "w2", 2), spec("work", "w3", 1)]),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[work]) as rt:
        agent = holder["agent"] = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert logged == [("w1", 0), ("w2", 1), ("w3", 2)]
        assert probe.max_peak() == 3
        check_pairing(agent.session.events)


# -- T-S2: commit order ------------------------------------------------------------------------


async def test_scheduler_commits_results_in_model_order_despite_reversed_settlement(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S2 / R9.17, R5.4: bodies settle c3, c2, c1; results are logged c1, c2, c3 and pair by id."""
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel(
        [
            CallTools([spec("read", "c1", 3), spec("read", "c2", 2), spec("read", "c3", 1)]),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert sorted(probe.ends, key=probe.ends.__getitem__) == ["c3", "c2", "c1"]
        events = agent.session.events
        assert result_ids(events) == ["c1", "c2", "c3"]
        texts = [block.text for data in results(events) for block in data.content]  # type: ignore[union-attr]
        assert texts == ["read:c1", "read:c2", "read:c3"]
        history = model.requests[1].messages
        assert [m.role for m in history] == ["user", "assistant", "user", "user", "user"]
        pairs = [
            (block.tool_call_id, block.content[0].text)  # type: ignore[union-attr]
            for message in history[2:]
            for block in message.content
            if isinstance(block, ToolResultBlock)
        ]
        assert pairs == [("c1", "read:c1"), ("c2", "read:c2"), ("c3", "read:c3")]
        check_pairing(events)


async def test_scheduler_later_calls_may_be_logged_before_earlier_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S2 / R9.17: with cap 2, c3's ``tool/call`` lands before c1's result; history still pairs."""
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel(
        [
            CallTools([spec("read", "c1", 5), spec("read", "c2", 1), spec("read", "c3", 1)]),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[read], max_parallel_tool_calls=2) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
        events = agent.session.events
        first_result = of_type(events, "tool/result")[0]
        assert isinstance(first_result.data, ToolResultEvent)
        assert first_result.data.call_id == "c1"
        assert call_seq(events, "c3") < first_result.seq
        assert result_ids(events) == ["c1", "c2", "c3"]
        derived = agent.session.derive_messages()
        ids = [b.tool_call_id for m in derived for b in m.content if isinstance(b, ToolResultBlock)]
        assert ids == ["c1", "c2", "c3"]
        check_pairing(events)


# -- T-S3: the cap -----------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [0, -1, True, False, "3", 2.5])
async def test_runtime_rejects_an_invalid_parallel_cap(
    autojump_clock: trio.testing.MockClock, cap: object
) -> None:
    """T-S3 / R9.11, R13.2: a cap that is not a positive int (bools included) is a ConfigError."""
    with trio.fail_after(DEADLINE), pytest.raises(retinue.ConfigError):
        async with retinue.open_runtime(models=ScriptedModel([]), max_parallel_tool_calls=cap):  # type: ignore[arg-type]
            pass


async def test_scheduler_keeps_at_most_cap_bodies_in_flight_and_replenishes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S3 / R9.14: cap 3 over eight calls: never more than 3 bodies, a freed slot is refilled at once."""
    probe = Probe()
    read = timed_tool("read", probe)
    durations = [1, 5, 5, 1, 1, 2, 1, 1]
    calls = [spec("read", f"c{i}", d) for i, d in enumerate(durations)]
    model = ScriptedModel([CallTools(calls), Reply("done")])
    async with runtime(model, tools=[read], max_parallel_tool_calls=3) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert probe.max_peak() == 3
        assert len(probe.ends) == 8
        # c0 ends at t0+1 while c1, c2 run until t0+5: c3 takes c0's slot right away.
        assert probe.starts["c3"] == probe.ends["c0"] < probe.ends["c1"]
        assert result_ids(agent.session.events) == [f"c{i}" for i in range(8)]
        check_pairing(agent.session.events)


async def test_scheduler_cap_one_is_fully_serial(autojump_clock: trio.testing.MockClock) -> None:
    """T-S3 / R9.11: with cap 1 every body starts after the previous one ended, in model order."""
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel(
        [CallTools([spec("read", f"c{i}", 4 - i) for i in range(4)]), Reply("done")]
    )
    async with runtime(model, tools=[read], max_parallel_tool_calls=1) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert probe.max_peak() == 1
        order = sorted(probe.starts, key=probe.starts.__getitem__)
        assert order == ["c0", "c1", "c2", "c3"]
        for before, after in itertools.pairwise(order):
            assert probe.starts[after] >= probe.ends[before]
        check_pairing(agent.session.events)


async def test_scheduler_commits_what_is_ready_before_starting_the_next_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S3 / R9.14: when a body settles, the ready results are committed, then the next call starts."""
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel([CallTools([spec("read", f"c{i}", 1) for i in range(3)]), Reply("done")])
    async with runtime(model, tools=[read], max_parallel_tool_calls=1) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        assert (await agent.ask("go")).reason.kind == "completed"
        events = agent.session.events
        logged = [
            (event.type, event.data.call_id)
            for event in events
            if isinstance(event.data, (ToolCallEvent, ToolResultEvent))
        ]
        assert logged == [
            (kind, f"c{i}") for i in range(3) for kind in ("tool/call", "tool/result")
        ]
        check_pairing(events)


@pytest.mark.parametrize("cap", [1, 2, 3])
async def test_scheduler_replenishes_when_bodies_settle_during_a_commit(
    autojump_clock: trio.testing.MockClock, cap: int
) -> None:
    """T-S3 / R9.14: bodies that settle while an earlier result is being committed still let every call run.

    Bodies take no virtual time; a ``tools/post-execute`` listener takes one
    second (a hook doing I/O), so later bodies settle while the commit cursor
    is busy. The pool must refill the freed slots instead of waiting for a
    wake-up that no running body will send.
    """
    probe = Probe()
    read = timed_tool("read", probe)

    async def slow_post(execution: ToolExecution, result: ToolExecutionResult, next_: Next) -> Any:
        await trio.sleep(1)
        return await next_()

    calls = [spec("read", f"c{i}", 0) for i in range(7)]
    model = ScriptedModel([CallTools(calls), Reply("done")])
    async with runtime(model, tools=[read], max_parallel_tool_calls=cap) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/post-execute", slow_post, agent=agent)
        agent.send("go")
        with trio.move_on_after(60):
            await agent.wait_idle()
        events = agent.session.events
        assert result_ids(events) == [f"c{i}" for i in range(7)], "the pool stalled"
        assert turn_ends(events) == ["completed"]
        assert probe.max_peak() <= cap
        check_pairing(events)


async def test_scheduler_default_cap_is_ten_for_every_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S3 / R9.11: without a setting the cap is 10, and it applies to each agent separately."""
    probe = Probe()
    read = timed_tool("read", probe)
    calls = [spec("read", f"c{i}", 1 + i % 3) for i in range(14)]
    model = ScriptedModel([CallTools(calls), Reply("done")], repeat_last=False)
    other = ScriptedModel([CallTools(calls), Reply("done")])
    router = {"scripted": model, "other": other}
    async with runtime(router, tools=[read]) as rt:
        first = await rt.create_agent("a", OPTIONS)
        second = await rt.create_agent("b", AgentOptions(model="other"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first.ask, "go")
            nursery.start_soon(second.ask, "go")
        assert probe.peak == {first.id: 10, second.id: 10}
        for agent in (first, second):
            assert turn_ends(agent.session.events) == ["completed"]
            check_pairing(agent.session.events)


# -- T-S4: ordered stages and contexts ---------------------------------------------------------


async def test_scheduler_pre_and_post_execute_run_in_model_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S4 / R9.15, R9.16: pre-execute and post-execute see calls in model order, bodies overlap."""
    probe = Probe()
    read = timed_tool("read", probe)
    seen: list[tuple[str, str]] = []

    async def pre(execution: ToolExecution, next_: Next) -> Any:
        seen.append(("pre", execution.call_id))
        return await next_()

    async def post(execution: ToolExecution, result: ToolExecutionResult, next_: Next) -> Any:
        seen.append(("post", execution.call_id))
        return await next_()

    model = ScriptedModel(
        [
            CallTools([spec("read", "c1", 3), spec("read", "c2", 1), spec("read", "c3", 2)]),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/pre-execute", pre, agent=agent)
        rt.hooks.on("tools/post-execute", post, agent=agent)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert [c for stage, c in seen if stage == "pre"] == ["c1", "c2", "c3"]
        assert [c for stage, c in seen if stage == "post"] == ["c1", "c2", "c3"]
        assert probe.max_peak() == 3
        check_pairing(agent.session.events)


async def test_scheduler_contexts_follow_all_results_in_model_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S4, T-I5 / R9.18: post-execute contexts become ``context/message`` after every result, in model order."""
    probe = Probe()
    read = timed_tool("read", probe)
    source = MessageSource("plugin", "notes")

    async def post(execution: ToolExecution, result: ToolExecutionResult, next_: Next) -> Any:
        await next_()
        return Accept(additional_context=HookContext(f"note {execution.call_id}", source))

    model = ScriptedModel(
        [
            CallTools([spec("read", "c1", 3), spec("read", "c2", 1), spec("read", "c3", 2)]),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/post-execute", post, agent=agent)
        assert (await agent.ask("go")).reason.kind == "completed"
        events = agent.session.events
        kinds = [e.type for e in events if e.type in ("tool/result", "context/message")]
        assert kinds == ["tool/result"] * 3 + ["context/message"] * 3
        contexts = [e.data.content[0].text for e in of_type(events, "context/message")]  # type: ignore[union-attr]
        assert contexts == ["note c1", "note c2", "note c3"]
        assert all(e.data.source == source for e in of_type(events, "context/message"))  # type: ignore[union-attr]
        check_pairing(events)


async def test_scheduler_denied_call_keeps_its_place_without_dispatch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S4 / R9.15, T-I6: a pre-execute denial is a pre-produced result committed in model order."""
    probe = Probe()
    read = timed_tool("read", probe)

    async def deny_middle(execution: ToolExecution, next_: Next) -> Any:
        if execution.call_id == "c2":
            return Deny("not this one")
        return await next_()

    model = ScriptedModel(
        [
            CallTools([spec("read", "c1", 2), spec("read", "c2", 1), spec("read", "c3", 1)]),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/pre-execute", deny_middle, agent=agent)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert "c2" not in probe.starts
        events = agent.session.events
        found = results(events)
        assert [r.call_id for r in found] == ["c1", "c2", "c3"]
        assert [r.is_error for r in found] == [False, True, False]
        assert found[1].content == (Text("Error: not this one"),)
        check_pairing(events)


_SET_BY_TOOL: contextvars.ContextVar[str] = contextvars.ContextVar("set_by_tool", default="-")


@retinue.tool(parallel_safe=True)
async def set_context(value: str) -> str:
    """Set a context variable, as decimal.setcontext or a tracing span does.

    Args:
        value: What to set.
    """
    _SET_BY_TOOL.set(value)
    await trio.lowlevel.checkpoint()
    return value


@retinue.tool
async def set_context_alone(value: str) -> str:
    """Set a context variable, as ``set_context`` does, in a call that runs alone.

    Args:
        value: What to set.
    """
    _SET_BY_TOOL.set(value)
    await trio.lowlevel.checkpoint()
    return value


@pytest.mark.parametrize(
    ("name", "calls"), [("set_context", 1), ("set_context", 2), ("set_context_alone", 2)]
)
async def test_scheduler_keeps_a_body_s_context_variables_its_own(
    autojump_clock: trio.testing.MockClock, name: str, calls: int
) -> None:
    """R9.16: a call's body runs in a task of its own, parallel-safe or run alone, so a
    context variable it sets (a ``decimal`` context, a tracing span) reaches no event of
    the agent's, its own call's and the other calls' results included, nor its next steps
    and turns."""
    step = CallTools([ToolCallSpec(name, f'{{"value": "v{i}"}}') for i in range(calls)])
    model = ScriptedModel([step, Reply("done"), Reply("again")])
    seen: list[str] = []
    async with runtime(model, tools=[set_context, set_context_alone]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("session/event", lambda _session, _event: seen.append(_SET_BY_TOOL.get()))
        assert (await agent.ask("go")).reason.kind == "completed"
        assert (await agent.ask("more")).reason.kind == "completed"
    assert len(seen) > 10
    assert set(seen) == {"-"}
