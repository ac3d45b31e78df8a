"""The per-step parallel tool scheduler (SPEC 9.3).

Calls are grouped lazily: a run of parallel-safe calls forms one group, each
exclusive call is a barrier, run alone. Inside a group, ``tool/call`` and pre-execute run
in model order in this task; only the bodies overlap, as child tasks of a
nursery the group opens inside the step's scope, at most
``max_parallel_tool_calls`` at a time (read as the group starts). A commit
cursor runs post-execute and appends ``tool/result`` in model order, in this
task. No body runs in this task, which is the agent's (an exclusive call's
too runs in a child task, alone), and no commit in a body's task: context
variables a body sets stay its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import trio

from retinue._content import ToolCall
from retinue._lossless import JsonValue, freeze_json, loads_frozen
from retinue._sources import HookContext
from retinue.tools import (
    PreparedCall,
    Tool,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
)

from ._core import AgentCore, StepSignal
from ._state import StepCalls, TurnState
from ._toolcall import enter_tool_call, leave_tool_call

__all__ = ["parse_arguments", "run_tool_calls"]


def parse_arguments(raw: str) -> JsonValue:
    """Parse a call's raw arguments (R9.6): empty → ``{}``, invalid JSON → the raw string."""
    if not raw.strip():
        return freeze_json({})
    try:
        return loads_frozen(raw)
    except (ValueError, TypeError):
        return raw


@attrs.define(eq=False, slots=True)
class _StepTools:
    """One step's tool calls, their prepared stages and settled results, by model order.

    Built once a step and shared by every group of it: the stages find the
    registry, the turn's record and the per-call slots here.
    """

    core: AgentCore
    state: TurnState
    record: StepCalls
    signal: StepSignal
    registry: ToolRegistry
    calls: tuple[ToolCall, ...]
    executions: list[ToolExecution]
    prepared: list[PreparedCall | None]
    results: list[ToolExecutionResult | None]
    # Made by the first result with additional context: most steps have none, and an
    # empty list would be one more object a step for the cyclic collector to traverse.
    contexts: list[HookContext] | None = None
    in_flight: int = 0
    # The scheduler's task while it waits for a body to settle, else None.
    waiter: trio.lowlevel.Task | None = None

    def withdraw_waiter(self, _: object) -> trio.lowlevel.Abort:
        """The abort function of the scheduler's park: a bound method, one object, where a
        closure would be a function, its cell and their tuple."""
        self.waiter = None
        return trio.lowlevel.Abort.SUCCEEDED

    def add_context(self, context: HookContext) -> None:
        """Keep *context*, a result's additional context, to inject once the step ends."""
        if self.contexts is None:
            self.contexts = []
        self.contexts.append(context)


async def run_tool_calls(
    core: AgentCore, state: TurnState, signal: StepSignal
) -> Sequence[HookContext] | None:
    """Run every tool call of the step; returns contexts to inject, or ``None`` if aborted."""
    step = _step_tools(core, state, signal)
    index = 0
    while index < len(step.calls):
        if signal.cancel_called:
            return None  # noqa: ASYNC910 - per step, no yield on abort: the step closes as aborted
        # A group is one exclusive call, or the parallel run from *index*, run with a
        # rolling pool. Only the first call is classified here (R9.13): the pool
        # classifies each further call as it is about to start it, ending the group
        # at the first exclusive one. Run here rather than in a helper: every
        # coroutine above the pool forwards each of its yields.
        lead = step.registry.parallel_tool(step.executions[index])
        if lead is None:
            await _run_exclusive(step, index)
            index += 1
        else:
            async with trio.open_nursery() as nursery:
                index = await _pool(step, index, lead, nursery)
        if signal.cancel_called:
            return None
    return step.contexts or ()  # noqa: ASYNC910 - per step; a step without tool calls adds no scheduling point


def _step_tools(core: AgentCore, state: TurnState, signal: StepSignal) -> _StepTools:
    calls = state.calls.calls
    agent, agent_id = core.agent, core.id
    # Positional but for the keyword-only raw_arguments: a class called with keywords
    # is given them as a dict, built per call.
    executions = [
        ToolExecution(
            call.id,
            call.name,
            parse_arguments(call.arguments),
            agent,
            agent_id,
            raw_arguments=call.arguments,
        )
        for call in calls
    ]
    size = len(calls)
    registry = core.services.tools
    return _StepTools(
        core, state, state.calls, signal, registry, calls, executions, [None] * size, [None] * size
    )


async def _pool(step: _StepTools, start: int, lead: Tool, nursery: trio.Nursery) -> int:
    """Start the group's calls as the pool has room, and commit them in order.

    Before each further call starts, its mode is read again; a call that
    became exclusive ends the group there (R9.13).
    """
    cap = step.core.services.max_parallel_tool_calls
    results = step.results
    end = len(results)
    started = cursor = start
    try:
        while cursor < end:
            # What is ready is committed before the next call starts (R9.14).
            if cursor < started and results[cursor] is not None:
                if not _commit_at_once(step, cursor):
                    await _commit(step, cursor)
                cursor += 1
            elif started < end and step.in_flight < cap and not step.signal.cancel_called:
                execution = step.executions[started]
                checked_by = lead if started == start else step.registry.parallel_tool(execution)
                if checked_by is None:
                    end = started
                    continue
                step.state.log_call(step.calls[started])  # _prepare_at_once, written out
                prepared = step.registry.prepare_at_once(execution, checked_by=checked_by)
                if prepared is None:
                    prepared = await _prepare(step, started, checked_by)
                if _admit(step, started, prepared):
                    step.in_flight += 1
                    nursery.start_soon(_dispatch, step, started, prepared)
                started += 1
            elif cursor < started:
                await _next_settled(step)
            else:
                break  # aborted: the calls never started get synthetic results
    except Exception as exc:
        # R9.22, T-S6: a failure of the scheduler itself (an observer raising on an
        # append) starts nothing more, but lets the bodies already running finish:
        # a tool is not cut off halfway by another's bookkeeping. The turn's error
        # path then logs what they returned. Recorded before the wait (R7.45): an
        # abort landing meanwhile raises its Cancelled in place of this failure,
        # which would otherwise end the turn aborted with no trace of it (R7.39).
        step.state.record_error(exc)
        while step.in_flight:
            await _next_settled(step)
        raise
    return end  # noqa: ASYNC910 - runs inside the group's nursery, whose exit checkpoints


async def _next_settled(step: _StepTools) -> None:
    """Wait until a running body of the step settles (:func:`_dispatch` wakes this task).

    A bare park rather than an Event: it runs once a group or more, and the
    bodies that settle while nobody waits have nothing to wake.
    """
    step.waiter = trio.lowlevel.current_task()
    await trio.lowlevel.wait_task_rescheduled(step.withdraw_waiter)


async def _run_exclusive(step: _StepTools, index: int) -> None:  # noqa: ASYNC910 - a call denied at once commits without a yield: the step checkpointed in its model stream
    """Run one exclusive call to its commit, its body alone in a task of its own."""
    prepared = _prepare_at_once(step, index, None)
    if prepared is None:
        prepared = await _prepare(step, index, None)
    if _admit(step, index, prepared):
        # A child task, as a parallel body's: a context variable the body sets is not
        # left behind in this task, the agent's, for its later steps and turns.
        async with trio.open_nursery() as nursery:
            step.in_flight += 1
            nursery.start_soon(_dispatch, step, index, prepared)
    if step.results[index] is not None and not _commit_at_once(step, index):
        await _commit(step, index)


def _prepare_at_once(step: _StepTools, index: int, checked_by: Tool | None) -> PreparedCall | None:
    """Log ``tool/call``, then run pre-execute if it has nothing to wait on, else ``None``.

    Without a pre-execute listener or a guard, the usual case, the call needs
    no coroutine to be prepared.
    """
    step.state.log_call(step.calls[index])
    return step.registry.prepare_at_once(step.executions[index], checked_by=checked_by)


async def _prepare(step: _StepTools, index: int, checked_by: Tool | None) -> PreparedCall:
    # The step checkpointed in the model stream; the tool body is the next one.
    return await step.registry.prepare(
        step.executions[index], checkpoint=False, checked_by=checked_by
    )


def _admit(step: _StepTools, index: int, prepared: PreparedCall) -> bool:
    """Keep the call's prepared stage; whether its body is to run (not denied, not aborted)."""
    step.prepared[index] = prepared
    call_id = step.calls[index].id
    if prepared.result is not None:  # not needs_dispatch, a property called for every call
        step.results[index] = prepared.result
        # A denial is this call's outcome: an abort before its commit logs it, not a
        # synthetic "never started" (R9.20).
        step.record.settled[call_id] = (prepared, prepared.result)
        return False
    if step.signal.cancel_called:
        return False
    step.record.started[call_id] = None
    return True


async def _dispatch(step: _StepTools, index: int, prepared: PreparedCall) -> None:
    try:
        mark, token = enter_tool_call(step.core)
        try:
            body = step.registry.dispatching(prepared, body_results=step.record.started)
            step.results[index] = result = await body
        finally:
            leave_tool_call(mark, token)
        # Kept for an abort that lands before its turn in the commit order comes.
        step.record.settled[step.calls[index].id] = (prepared, result)
    finally:
        step.in_flight -= 1
    # Only a settled body wakes the scheduler. One that raised (Ctrl-C) cancels the
    # group's nursery, whose cancel reaches the parked scheduler: woken here, it would
    # start the next call into that cancelled nursery first.
    waiter = step.waiter
    if waiter is not None:
        step.waiter = None
        trio.lowlevel.reschedule(waiter)


def _commit_at_once(step: _StepTools, index: int) -> bool:
    """:func:`_commit` when no post-execute listener has to see the result; whether it did."""
    prepared, result = step.prepared[index], step.results[index]
    assert prepared is not None
    assert result is not None
    final = step.registry.finish_at_once(prepared, result)
    if final is None:
        return False
    # _log_final, written out: a call spared for every call.
    step.state.log_result(step.calls[index].id, final)
    if final.additional_context is not None:
        step.add_context(final.additional_context)
    return True


async def _commit(step: _StepTools, index: int) -> None:
    """Run post-execute for one settled call and append its ``tool/result`` (R9.17)."""
    prepared, result = step.prepared[index], step.results[index]
    assert prepared is not None
    assert result is not None
    _log_final(step, index, await step.registry.finish(prepared, result))


def _log_final(step: _StepTools, index: int, final: ToolExecutionResult) -> None:
    step.state.log_result(step.calls[index].id, final)
    if final.additional_context is not None:
        step.add_context(final.additional_context)
