"""The per-step tool scheduler under an abort: what starts, what is answered and what is kept
(SPEC 9.3; T-S5).

Tools record their bodies in a :class:`Probe`; orderings are forced with virtual sleeps of
distinct lengths, as in test_scheduler.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Accept, HookContext, Text
from retinue.session import Event, ToolCallEvent
from retinue.testing import CallTools, Reply, ScriptedModel
from retinue.tools import ToolExecution, ToolExecutionResult
from tests.helpers import OPTIONS, Next, idle_events, last_end_reason, of_type, runtime, turn_ends
from tests.scenarios._scheduler_kit import (
    Probe,
    check_pairing,
    codes,
    result_ids,
    results,
    spec,
    timed_tool,
)

# -- T-S5: abort -------------------------------------------------------------------------------


@pytest.mark.parametrize("first", ["read", "write"])
async def test_scheduler_already_aborted_step_starts_nothing(
    autojump_clock: trio.testing.MockClock, first: str
) -> None:
    """T-S5 / R9.19, R9.21, R9.25: aborted before the first call, nothing starts, every call
    is answered.

    A ``session/event`` observer cancels as soon as the assistant message with
    the calls is logged; each call gets its ``tool/call`` record and an
    ``ABORTED_BEFORE_DISPATCH`` result, none is prepared (``tools/pre-execute``
    asks about none: an approval would be asked of a cancelled turn), whether the
    first group is parallel-safe or exclusive, and the model is not called again.
    """
    probe = Probe()
    read, write = timed_tool("read", probe), timed_tool("write", probe, safe=False)
    second = "write" if first == "read" else "read"
    model = ScriptedModel(
        [CallTools([spec(first, "c1"), spec(second, "c2"), spec("read", "c3")]), Reply("next")]
    )
    prepared: list[str] = []

    async def record_prepared(execution: ToolExecution, call_next: Next) -> Any:
        prepared.append(execution.call_id)
        return await call_next()

    async with runtime(model, tools=[read, write]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def cancel_on_message(_session: object, event: Event) -> None:
            if event.type == "assistant/message":
                agent.cancel("changed my mind")

        rt.hooks.on("session/event", cancel_on_message, agent=agent)
        rt.hooks.on("tools/pre-execute", record_prepared, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "aborted"
        assert probe.starts == {}
        assert prepared == []
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
