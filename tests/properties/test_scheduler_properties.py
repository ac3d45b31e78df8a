"""Scheduler commit order under random completion orders and random parallel-safe flags (SPEC 9.3).

Properties, for any list of calls (each parallel-safe or exclusive, each body
taking a random virtual time) and any cap: ``tool/result`` events are in model
order and each points at its own ``tool/call``; never more than ``cap``
bodies run at once; an exclusive call runs alone and groups never overlap;
every call gets exactly one result; the turn completes; the log invariants hold.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import trio
import trio.testing
from hypothesis import given, strategies as st

import retinue
from retinue.session import ToolCallEvent, ToolResultEvent
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.helpers import OPTIONS

CALLS = st.lists(st.tuples(st.booleans(), st.integers(0, 6)), min_size=1, max_size=9)


class Probe:
    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.spans: dict[str, list[float]] = {}
        self.alone: dict[str, bool] = {}

    def enter(self, label: str) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.spans[label] = [trio.current_time()]
        self.alone[label] = self.in_flight == 1

    def leave(self, label: str) -> None:
        self.in_flight -= 1
        self.spans[label].append(trio.current_time())


def make_tools(probe: Probe) -> list[retinue.Tool]:
    async def body(label: str, seconds: float) -> str:
        """Run.

        Args:
            label: Which call.
            seconds: How long.
        """
        probe.enter(label)
        try:
            await trio.sleep(seconds)
        finally:
            probe.leave(label)
        return label

    return [
        retinue.tool(name="safe", parallel_safe=True)(body),
        retinue.tool(name="solo", parallel_safe=False)(body),
    ]


def groups(calls: list[tuple[bool, int]]) -> list[list[int]]:
    """Indexes of each scheduling group (R9.12)."""
    found: list[list[int]] = []
    for index, (safe, _) in enumerate(calls):
        if safe and found and calls[found[-1][-1]][0]:
            found[-1].append(index)
        else:
            found.append([index])
    return found


async def _scenario(calls: list[tuple[bool, int]], cap: int, post_delay: int) -> None:
    probe = Probe()
    specs = [
        ToolCallSpec(
            "safe" if safe else "solo", json.dumps({"label": f"c{i}", "seconds": d}), id=f"c{i}"
        )
        for i, (safe, d) in enumerate(calls)
    ]
    model = ScriptedModel([CallTools(specs), Reply("done")])
    with trio.fail_after(10_000):
        async with retinue.open_runtime(
            models=model, tools=make_tools(probe), max_parallel_tool_calls=cap
        ) as rt:
            agent = await rt.create_agent("p", OPTIONS)
            if post_delay:

                async def slow_post(_execution: object, _result: object, next_: Any) -> Any:
                    await trio.sleep(post_delay)
                    return await next_()

                rt.hooks.on("tools/post-execute", slow_post, agent=agent)
            result = await agent.ask("go")
    assert result.reason.kind == "completed"
    events = agent.session.events
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    ids = [f"c{i}" for i in range(len(calls))]
    call_seqs = {e.data.call_id: e.seq for e in events if isinstance(e.data, ToolCallEvent)}
    assert sorted(call_seqs) == sorted(ids)
    found = [
        (e.data.call_id, e.source_event_seqs) for e in events if isinstance(e.data, ToolResultEvent)
    ]
    assert [call_id for call_id, _ in found] == ids, "results are committed in model order"
    assert all(sources == (call_seqs[call_id],) for call_id, sources in found)
    assert probe.peak <= cap
    assert sorted(probe.spans) == sorted(ids), "every body ran exactly once"
    ordered = groups(calls)
    for before, after in itertools.pairwise(ordered):
        end = max(probe.spans[f"c{i}"][1] for i in before)
        assert all(probe.spans[f"c{i}"][0] >= end for i in after), "groups run one after another"
    for index, (safe, _) in enumerate(calls):
        if not safe:
            assert probe.alone[f"c{index}"], "an exclusive call runs alone"


@given(calls=CALLS, cap=st.integers(1, 4), post_delay=st.sampled_from([0, 0, 1]))
def test_scheduler_commit_order_and_cap_hold_for_any_completion_order(
    calls: list[tuple[bool, int]], cap: int, post_delay: int
) -> None:
    """T-S1..T-S3 / R9.12, R9.14, R9.17: model-order commit, cap respected, groups respected, one result each.

    Bodies take 0-6 virtual seconds; a post-execute hook sometimes takes one,
    so bodies also settle while earlier results are being committed.
    """
    trio.run(_scenario, calls, cap, post_delay, clock=trio.testing.MockClock(autojump_threshold=0))
