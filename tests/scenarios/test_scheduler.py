"""The per-step parallel tool scheduler end to end (SPEC 9.3; T-S1..T-S6; DESIGN 4 and 5).

Every tool here is async (under autojump a worker thread would let virtual time
race ahead) and records, in a :class:`Probe`, when its body starts and ends and
how many bodies of its agent are in flight. Orderings are forced with virtual
sleeps of distinct lengths, never with wake-up order.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import Accept, AgentOptions, Deny, HookContext, MessageSource, Text, ToolResultBlock
from retinue.session import Event, Session, ToolCallEvent, ToolResultEvent
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from retinue.tools import Tool, ToolContext, ToolExecution, ToolExecutionResult
from tests.helpers import OPTIONS, Next, idle_events, last_end_reason, of_type, runtime, turn_ends


@attrs.define
class Probe:
    """What the tool bodies did: start/end times, in-flight counts per agent, cancellations."""

    starts: dict[str, float] = attrs.field(factory=dict)
    ends: dict[str, float] = attrs.field(factory=dict)
    cancelled: list[str] = attrs.field(factory=list)
    in_flight: dict[str, int] = attrs.field(factory=dict)
    peak: dict[str, int] = attrs.field(factory=dict)
    overlap_at_start: dict[str, int] = attrs.field(factory=dict)
    watches: list[tuple[Callable[[Probe], bool], trio.Event]] = attrs.field(factory=list)

    def enter(self, agent_id: str, label: str) -> None:
        self.starts[label] = trio.current_time()
        now = self.in_flight.get(agent_id, 0) + 1
        self.in_flight[agent_id] = now
        self.overlap_at_start[label] = now
        self.peak[agent_id] = max(self.peak.get(agent_id, 0), now)
        for condition, event in self.watches:
            if condition(self):
                event.set()

    async def wait_until(self, condition: Callable[[Probe], bool]) -> None:
        """Wait until a body start makes *condition* true."""
        event = trio.Event()
        self.watches.append((condition, event))
        if condition(self):
            event.set()
        await event.wait()

    def leave(self, agent_id: str, label: str, *, done: bool) -> None:
        self.in_flight[agent_id] -= 1
        if done:
            self.ends[label] = trio.current_time()
        else:
            self.cancelled.append(label)

    def max_peak(self) -> int:
        return max(self.peak.values(), default=0)


def timed_tool(name: str, probe: Probe, *, safe: Any = True) -> Tool:
    """An async tool that sleeps ``seconds`` of virtual time (0 = a bare checkpoint)."""

    async def body(label: str, seconds: float, ctx: ToolContext) -> str:
        """Work for a while.

        Args:
            label: Which call this is.
            seconds: How long the body runs.
        """
        agent_id = ctx.agent_id or "?"
        probe.enter(agent_id, label)
        done = False
        try:
            await trio.sleep(seconds)
            done = True
        finally:
            probe.leave(agent_id, label, done=done)
        return f"{name}:{label}"

    return retinue.tool(name=name, parallel_safe=safe)(body)


def spec(name: str, label: str, seconds: float = 1.0) -> ToolCallSpec:
    return ToolCallSpec(name, json.dumps({"label": label, "seconds": seconds}), id=label)


def results(events: Any) -> list[ToolResultEvent]:
    found = [event.data for event in of_type(events, "tool/result")]
    assert all(isinstance(data, ToolResultEvent) for data in found)
    return found  # type: ignore[return-value]


def result_ids(events: Any) -> list[str]:
    return [data.call_id for data in results(events)]


def codes(events: Any) -> dict[str, str | None]:
    return {data.call_id: data.error.code if data.error else None for data in results(events)}


def call_seq(events: Any, call_id: str) -> int:
    (event,) = [
        e
        for e in of_type(events, "tool/call")
        if isinstance(e.data, ToolCallEvent) and e.data.call_id == call_id
    ]
    return event.seq


def check_pairing(events: Any) -> None:
    """Each result points at its own ``tool/call`` (R9.17) and the log invariants hold."""
    for event in of_type(events, "tool/result"):
        assert isinstance(event.data, ToolResultEvent)
        assert event.source_event_seqs == (call_seq(events, event.data.call_id),)
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)


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
async def test_runtime_rejects_an_invalid_parallel_cap(cap: object) -> None:
    """T-S3 / R9.11, R13.2: a cap that is not a positive int (bools included) is a ConfigError."""
    with pytest.raises(retinue.ConfigError):
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


# -- T-S5: abort -------------------------------------------------------------------------------


async def test_scheduler_already_aborted_step_starts_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R9.19, R9.21, R9.25: aborted before the first call, no body runs, every call is answered.

    A ``session/event`` observer cancels as soon as the assistant message with
    the calls is logged; each call gets its ``tool/call`` record and an
    ``ABORTED_BEFORE_DISPATCH`` result, and the model is not called again.
    """
    probe = Probe()
    read, write = timed_tool("read", probe), timed_tool("write", probe, safe=False)
    model = ScriptedModel(
        [CallTools([spec("read", "c1"), spec("write", "c2"), spec("read", "c3")]), Reply("next")]
    )
    async with runtime(model, tools=[read, write]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def cancel_on_message(_session: object, event: Event) -> None:
            if event.type == "assistant/message":
                agent.cancel("changed my mind")

        rt.hooks.on("session/event", cancel_on_message, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "aborted"
        assert probe.starts == {}
        events = agent.session.events
        assert [e.data.call_id for e in of_type(events, "tool/call")] == ["c1", "c2", "c3"]  # type: ignore[union-attr]
        assert codes(events) == dict.fromkeys(["c1", "c2", "c3"], "ABORTED_BEFORE_DISPATCH")
        assert all(r.is_error for r in results(events))
        assert model.statistics().calls == 1
        check_pairing(events)


async def test_scheduler_abort_on_a_tool_call_record_prepares_no_later_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R9.20, R9.21: a cancel from an observer of c1's ``tool/call`` prepares nothing after c1.

    The cancel lands with no checkpoint between it and the pool: c2 and c3
    are not run through pre-execute (no listener sees them) and no body
    starts, yet each call still gets one ``tool/call`` record and an
    ``ABORTED_BEFORE_DISPATCH`` result.
    """
    probe = Probe()
    read = timed_tool("read", probe)
    prepared: list[str] = []

    async def record_pre(execution: ToolExecution, next_: Next) -> Any:
        prepared.append(execution.call_id)
        return await next_()

    model = ScriptedModel(
        [CallTools([spec("read", "c1"), spec("read", "c2"), spec("read", "c3")]), Reply("next")]
    )
    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def cancel_on_first_call(_session: object, event: Event) -> None:
            if isinstance(event.data, ToolCallEvent) and event.data.call_id == "c1":
                agent.cancel("changed my mind")

        rt.hooks.on("session/event", cancel_on_first_call, agent=agent)
        rt.hooks.on("tools/pre-execute", record_pre, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "aborted"
        assert prepared == ["c1"]
        assert probe.starts == {}
        events = agent.session.events
        assert [e.data.call_id for e in of_type(events, "tool/call")] == ["c1", "c2", "c3"]  # type: ignore[union-attr]
        assert codes(events) == dict.fromkeys(["c1", "c2", "c3"], "ABORTED_BEFORE_DISPATCH")
        assert model.statistics().calls == 1
        check_pairing(events)


async def test_scheduler_abort_during_pre_execute_stops_the_siblings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R9.20: a cancel from c2's pre-execute stops c2, c3 and c4 from being dispatched.

    c1's body is running and is cancelled (``ABORTED``); c2's ``tool/call`` is
    logged (R9.15) but its body never runs; c3 and c4 are never started. All of
    c2..c4 are answered ``ABORTED_BEFORE_DISPATCH``, each after exactly one
    ``tool/call`` record.
    """
    probe = Probe()
    read = timed_tool("read", probe)
    holder: dict[str, retinue.Agent] = {}

    async def cancel_in_pre(execution: ToolExecution, next_: Next) -> Any:
        if execution.call_id == "c2":
            await trio.sleep(1)
            assert "c1" in probe.starts
            holder["agent"].cancel("pre-execute said stop")
        return await next_()

    model = ScriptedModel(
        [
            CallTools(
                [spec("read", "c1", 10), spec("read", "c2"), spec("read", "c3"), spec("read", "c4")]
            ),
            Reply("next"),
        ]
    )
    async with runtime(model, tools=[read]) as rt:
        agent = holder["agent"] = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/pre-execute", cancel_in_pre, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "aborted"
        assert last_end_reason(agent.session.events).reason == "pre-execute said stop"
        assert list(probe.starts) == ["c1"]
        assert probe.cancelled == ["c1"]
        events = agent.session.events
        assert result_ids(events) == ["c1", "c2", "c3", "c4"]
        assert [e.data.call_id for e in of_type(events, "tool/call")] == ["c1", "c2", "c3", "c4"]  # type: ignore[union-attr]
        assert codes(events) == {
            "c1": "ABORTED",
            "c2": "ABORTED_BEFORE_DISPATCH",
            "c3": "ABORTED_BEFORE_DISPATCH",
            "c4": "ABORTED_BEFORE_DISPATCH",
        }
        assert model.statistics().calls == 1
        check_pairing(events)


async def test_scheduler_abort_mid_pool_stops_replenishing_and_drops_contexts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R9.20, R9.21, DESIGN 5: an abort mid-pool starts nothing new; every call still has a result.

    Cap 2 over c0 (1 s), c1 and c2 (10 s), c3, c4: c0 settles and is committed
    (with a post-execute context), c2 takes its slot, then a cancel at t=5
    cancels c1 and c2 (``ABORTED``); c3 and c4 never start and get a
    ``tool/call`` record plus ``ABORTED_BEFORE_DISPATCH``. The buffered context
    is dropped and no second model request is made.
    """
    probe = Probe()
    read = timed_tool("read", probe)

    async def post(execution: ToolExecution, result: ToolExecutionResult, next_: Next) -> Any:
        await next_()
        return Accept(additional_context=HookContext(f"note {execution.call_id}"))

    durations = {"c0": 1, "c1": 10, "c2": 10, "c3": 1, "c4": 1}
    model = ScriptedModel(
        [CallTools([spec("read", k, d) for k, d in durations.items()]), Reply("next")]
    )
    async with runtime(model, tools=[read], max_parallel_tool_calls=2) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/post-execute", post, agent=agent)
        agent.send("go")
        await probe.wait_until(lambda p: "c2" in p.starts)
        await trio.sleep(1)
        agent.cancel("enough")
        events = await idle_events(agent)
        assert turn_ends(events) == ["aborted"]
        assert sorted(probe.starts) == ["c0", "c1", "c2"]
        assert sorted(probe.cancelled) == ["c1", "c2"]
        assert result_ids(events) == ["c0", "c1", "c2", "c3", "c4"]
        assert codes(events) == {
            "c0": None,
            "c1": "ABORTED",
            "c2": "ABORTED",
            "c3": "ABORTED_BEFORE_DISPATCH",
            "c4": "ABORTED_BEFORE_DISPATCH",
        }
        assert [e.data.call_id for e in of_type(events, "tool/call")] == list(durations)  # type: ignore[union-attr]
        assert of_type(events, "context/message") == []
        assert model.statistics().calls == 1
        assert sum(probe.in_flight.values()) == 0
        check_pairing(events)


async def test_scheduler_abort_runs_no_later_barrier_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R9.20: after an abort in the first group, the exclusive barrier and what follows never run."""
    probe = Probe()
    read, write = timed_tool("read", probe), timed_tool("write", probe, safe=False)
    model = ScriptedModel(
        [
            CallTools(
                [
                    spec("read", "r1", 10),
                    spec("read", "r2", 10),
                    spec("write", "w"),
                    spec("read", "r3"),
                ]
            ),
            Reply("next"),
        ]
    )
    async with runtime(model, tools=[read, write]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await probe.wait_until(lambda p: len(p.starts) == 2)
        agent.cancel()
        events = await idle_events(agent)
        assert turn_ends(events) == ["aborted"]
        assert sorted(probe.starts) == ["r1", "r2"]
        assert codes(events) == {
            "r1": "ABORTED",
            "r2": "ABORTED",
            "w": "ABORTED_BEFORE_DISPATCH",
            "r3": "ABORTED_BEFORE_DISPATCH",
        }
        assert model.statistics().calls == 1
        check_pairing(events)


async def test_scheduler_abort_answers_the_calls_after_one_already_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R9.20, R9.21, R9.25: an abort while the second of three exclusive calls runs
    keeps the first call's own result and answers the running call ``ABORTED`` and the
    one never started ``ABORTED_BEFORE_DISPATCH``, both named ``AbortedError``."""
    probe = Probe()
    write = timed_tool("write", probe, safe=False)
    model = ScriptedModel(
        [
            CallTools([spec("write", "w1"), spec("write", "w2", 100), spec("write", "w3")]),
            Reply("next"),
        ]
    )
    async with runtime(model, tools=[write]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await probe.wait_until(lambda p: "w2" in p.starts)
        agent.cancel()
        events = await idle_events(agent)
    assert turn_ends(events) == ["aborted"]
    answers = {data.call_id: data for data in results(events)}
    assert list(answers) == ["w1", "w2", "w3"]
    assert not answers["w1"].is_error
    assert answers["w1"].content == (Text("write:w1"),)
    errors = {call_id: answers[call_id].error for call_id in ("w2", "w3")}
    assert {k: (e.name, e.code) if e else None for k, e in errors.items()} == {
        "w2": ("AbortedError", "ABORTED"),
        "w3": ("AbortedError", "ABORTED_BEFORE_DISPATCH"),
    }
    check_pairing(events)


async def test_scheduler_dispose_mid_pool_answers_every_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R9.25, R2.36: disposal while bodies run ends the turn ``disposed`` with every call answered."""
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel([CallTools([spec("read", f"c{i}", 10) for i in range(4)]), Reply("next")])
    async with runtime(model, tools=[read], max_parallel_tool_calls=2) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await probe.wait_until(lambda p: len(p.starts) == 2)
        await agent.dispose()
        events = agent.session.events
        assert turn_ends(events) == ["disposed"]
        assert codes(events) == {
            "c0": "ABORTED",
            "c1": "ABORTED",
            "c2": "ABORTED_BEFORE_DISPATCH",
            "c3": "ABORTED_BEFORE_DISPATCH",
        }
        assert sum(probe.in_flight.values()) == 0
        check_pairing(events)


# -- T-S6: internal failure --------------------------------------------------------------------


@pytest.mark.parametrize("cap", [1, 2])
async def test_scheduler_internal_failure_answers_every_call_and_the_driver_survives(
    autojump_clock: trio.testing.MockClock, cap: int
) -> None:
    """T-S6 / R9.22, R4.8, DESIGN 5: a failure inside the scheduler ends the turn ``error``, no call dangles.

    A ``session/event`` listener raises when c1's ``tool/result`` is appended;
    R4.8 surfaces that raise to the scheduler (the result is in the log). The
    scheduler starts nothing more but lets the bodies already running finish
    (T-S6: none is cut off halfway), and they keep their own results; calls
    never started get their ``tool/call`` record and ``ABORTED_BEFORE_DISPATCH``.
    The turn ends ``error`` carrying the listener's message, no body outlives
    the turn, ``agent/error`` reports it, and the next turn runs normally.
    """
    probe = Probe()
    read = timed_tool("read", probe)
    durations = {"c0": 1, "c1": 2, "c2": 5, "c3": 5, "c4": 5}
    model = ScriptedModel(
        [CallTools([spec("read", k, d) for k, d in durations.items()]), Reply("after")]
    )
    errors: list[BaseException] = []

    def explode(_session: object, event: Event) -> None:
        if (
            isinstance(event.data, ToolResultEvent)
            and event.data.call_id == "c1"
            and not event.data.is_error
        ):
            raise RuntimeError("observer exploded")

    async with runtime(model, tools=[read], max_parallel_tool_calls=cap) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        remove = rt.hooks.on("session/event", explode, agent=agent)
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
        result = await agent.ask("go")
        events = agent.session.events
        assert result.reason.kind == "error"
        assert len(errors) == 1
        found = codes(events)
        assert list(found) == list(durations)
        assert found["c0"] is None
        assert found["c1"] is None, "the raising append is in the log (R4.8)"
        failed_at = next(
            e.seq
            for e in of_type(events, "tool/result")
            if isinstance(e.data, ToolResultEvent) and e.data.call_id == "c1"
        )
        for call_id in ("c2", "c3", "c4"):
            started = call_seq(events, call_id) < failed_at
            expected = None if started else "ABORTED_BEFORE_DISPATCH"
            assert found[call_id] == expected, call_id
            assert (call_id in probe.ends) == started, call_id
        assert probe.cancelled == []
        assert sum(probe.in_flight.values()) == 0
        assert model.statistics().calls == 1
        check_pairing(events)
        remove()
        again = await agent.ask("again")
        assert again.reason.kind == "completed"
        assert agent.status == "idle"
        check_session_invariants(agent.session.events)
        # R7.45: the turn's error names the failure, not the nursery that carried it.
        assert result.reason.message is not None
        assert "observer exploded" in result.reason.message
        assert "observer exploded" in str(errors[0])


@pytest.mark.parametrize("appends_first", [False, True], ids=["raises", "appends-then-raises"])
@pytest.mark.parametrize("safe", [False, True], ids=["exclusive", "parallel"])
async def test_scheduler_failure_on_a_tool_call_append_logs_one_record_per_call(
    autojump_clock: trio.testing.MockClock, safe: bool, appends_first: bool
) -> None:
    """T-S6 / R4.8, R4.15, R9.21: a raise from c1's ``tool/call`` observer keeps one record per call.

    The ``tool/call`` event is in the log when its observer raises (R4.8), even
    when the observer appended an event of its own after it first; the
    synthetic answers must reuse it rather than log a second ``tool/call`` for
    the same id, and every call still gets exactly one result.
    """
    probe = Probe()
    tool = timed_tool("work", probe, safe=safe)

    def explode(session: Session, event: Event) -> None:
        if isinstance(event.data, ToolCallEvent) and event.data.call_id == "c1":
            if appends_first:
                session.append_custom("plugin/note", {"saw": "c1"})
            raise RuntimeError("call observer exploded")

    model = ScriptedModel(
        [CallTools([spec("work", "c0"), spec("work", "c1"), spec("work", "c2")]), Reply("after")]
    )
    async with runtime(model, tools=[tool]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        remove = rt.hooks.on("session/event", explode, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "error"
        events = agent.session.events
        call_ids = [e.data.call_id for e in of_type(events, "tool/call")]  # type: ignore[union-attr]
        assert sorted(call_ids) == ["c0", "c1", "c2"], call_ids
        assert sorted(result_ids(events)) == ["c0", "c1", "c2"]
        check_pairing(events)
        remove()
        assert (await agent.ask("again")).reason.kind == "completed"


async def test_scheduler_abort_answers_calls_whose_record_observer_appended_and_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R4.8, R4.15, R9.21, DESIGN 5: aborted before dispatch, each call's ``tool/call``
    record is logged once and answered, though its observer appended a note and raised.
    """
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel([CallTools([spec("read", "c1"), spec("read", "c2")]), Reply("next")])
    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def observer(session: Session, event: Event) -> None:
            if event.type == "assistant/message":
                agent.cancel("changed my mind")
            if isinstance(event.data, ToolCallEvent):
                session.append_custom("plugin/note", {"saw": event.data.call_id})
                raise RuntimeError("call observer exploded")

        rt.hooks.on("session/event", observer, agent=agent)
        assert (await agent.ask("go")).reason.kind == "aborted"
        events = agent.session.events
        assert [e.data.call_id for e in of_type(events, "tool/call")] == ["c1", "c2"]  # type: ignore[union-attr]
        assert codes(events) == dict.fromkeys(["c1", "c2"], "ABORTED_BEFORE_DISPATCH")
        assert probe.starts == {}
        check_pairing(events)
        check_session_invariants(events)


@pytest.mark.parametrize("post_execute", [False, True])
async def test_scheduler_abort_keeps_the_result_of_a_body_that_had_finished(
    autojump_clock: trio.testing.MockClock, post_execute: bool
) -> None:
    """R9.20, DESIGN 5: c1 (10 s) and c2 (0 s) run in parallel; c2's result waits for c1's
    in model order when a cancel lands. c1 was cancelled mid-run (``ABORTED``); c2's body
    had finished, so it keeps its own result, unless a post-execute listener has yet to
    see that result (it cannot run once the step is over), and then it is ``ABORTED`` too.
    """
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel([CallTools([spec("read", "c1", 10), spec("read", "c2", 0)]), Reply("x")])
    async with runtime(model, tools=[read], max_parallel_tool_calls=2) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        if post_execute:
            rt.hooks.on("tools/post-execute", lambda _e, _r, next_: next_(), agent=agent)
        agent.send("go")
        await probe.wait_until(lambda p: "c2" in p.starts)
        await trio.sleep(1)
        assert "c2" in probe.ends
        agent.cancel("enough")
        events = await idle_events(agent)
    assert turn_ends(events) == ["aborted"]
    assert probe.cancelled == ["c1"]
    assert result_ids(events) == ["c1", "c2"]
    assert codes(events) == {"c1": "ABORTED", "c2": "ABORTED" if post_execute else None}
    check_pairing(events)


async def test_scheduler_abort_keeps_a_denial_waiting_behind_an_earlier_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20, T-S4: c2 is denied by pre-execute while c1 (10 s) runs; the denial waits for
    c1's result in model order when a cancel lands. The model is told c2 was refused, not
    that it was aborted before it started (it would only ask for it again)."""
    probe = Probe()
    read = timed_tool("read", probe)

    async def deny_second(execution: ToolExecution, next_: Next) -> Any:
        if execution.call_id == "c2":
            return Deny("not now")
        return await next_()

    model = ScriptedModel([CallTools([spec("read", "c1", 10), spec("read", "c2", 0)]), Reply("x")])
    async with runtime(model, tools=[read], max_parallel_tool_calls=2) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/pre-execute", deny_second, agent=agent)
        agent.send("go")
        await probe.wait_until(lambda p: "c1" in p.starts)
        await trio.sleep(1)
        agent.cancel("enough")
        events = await idle_events(agent)
    assert turn_ends(events) == ["aborted"]
    assert "c2" not in probe.starts
    assert result_ids(events) == ["c1", "c2"]
    assert codes(events)["c1"] == "ABORTED"
    denial = results(events)[1]
    assert (denial.is_error, denial.content) == (True, (Text("Error: not now"),))
    check_pairing(events)


async def test_scheduler_checks_the_arguments_again_for_a_tool_replaced_after_classification(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3, R9.13: a call runs the tool its name resolves to when it starts; arguments found
    valid by the tool that classified it are checked again by a replacement.

    w2's pre-execute listener replaces ``work`` for the agent, once w1's body
    has started, with a tool that takes other parameters: w2 gets an ``INVALID_ARGUMENTS`` result and the
    replacement's body never runs.
    """
    probe = Probe()
    ran: list[str] = []

    @retinue.tool(name="work", parallel_safe=True)
    async def other_work(path: str) -> str:
        """Work on a path.

        Args:
            path: Where to work.
        """
        ran.append(path)
        await trio.lowlevel.checkpoint()
        return path

    holder: dict[str, retinue.Agent] = {}

    async def replace_before_w2(execution: ToolExecution, next_: Next) -> Any:
        if execution.call_id == "w2":
            await trio.sleep(1)  # w1's body has started with the tool it was classified by
            rt.tools.add(other_work, agent=holder["agent"])
        return await next_()

    model = ScriptedModel(
        [CallTools([spec("work", "w1", 2), spec("work", "w2", 1)]), Reply("done")]
    )
    async with runtime(model, tools=[timed_tool("work", probe)]) as rt:
        agent = holder["agent"] = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/pre-execute", replace_before_w2, agent=agent)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert list(probe.starts) == ["w1"]
        assert ran == []
        assert codes(agent.session.events) == {"w1": None, "w2": "INVALID_ARGUMENTS"}
        check_pairing(agent.session.events)


async def test_scheduler_a_call_whose_step_aborted_before_its_task_ran_never_enters_its_body(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20, R7.40: the body is a cancel point on entry: c1 was started, but the cancel from
    c2's ``tool/call`` observer came before its task ran, so a body with no await of its
    own does not run to completion behind the abort."""
    ran: list[str] = []

    @retinue.tool(parallel_safe=True)
    async def mark(label: str) -> str:
        """Note that the body ran, without awaiting anything.

        Args:
            label: Which call this is.
        """
        ran.append(label)
        return label

    model = ScriptedModel(
        [
            CallTools(
                [
                    ToolCallSpec("mark", '{"label": "c1"}', id="c1"),
                    ToolCallSpec("mark", '{"label": "c2"}', id="c2"),
                ]
            ),
            Reply("next"),
        ]
    )
    async with runtime(model, tools=[mark]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def cancel_on_second_call(_session: object, event: Event) -> None:
            if isinstance(event.data, ToolCallEvent) and event.data.call_id == "c2":
                agent.cancel("changed my mind")

        rt.hooks.on("session/event", cancel_on_second_call, agent=agent)
        assert (await agent.ask("go")).reason.kind == "aborted"
        assert ran == []
        assert codes(agent.session.events) == {"c1": "ABORTED", "c2": "ABORTED_BEFORE_DISPATCH"}
        check_pairing(agent.session.events)
