"""Probed async tools and readers of their results, for the per-step tool scheduler tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import trio

import retinue
from retinue.session import ToolCallEvent, ToolResultEvent
from retinue.testing import ToolCallSpec, check_no_dangling_tool_calls, check_session_invariants
from retinue.tools import Tool, ToolContext
from tests.helpers import of_type


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
