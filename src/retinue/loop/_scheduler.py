"""The per-step parallel tool scheduler (SPEC 9.3).

Calls are grouped lazily: a run of parallel-safe calls forms one group, each
exclusive call is a barrier. Inside a group, ``tool/call`` and pre-execute run
in model order in this task; only the bodies overlap, as child tasks of the
step's nursery, at most ``max_parallel_tool_calls`` at a time. A commit cursor
runs post-execute and appends ``tool/result`` in model order.
"""

from __future__ import annotations

import attrs
import trio

from retinue._content import HookContext, ToolCall
from retinue._lossless import JsonValue, freeze_json, loads_frozen
from retinue.session import ToolCallEvent
from retinue.tools import PreparedCall, Tool, ToolExecution, ToolExecutionResult

from ._core import AgentCore, StepSignal
from ._state import TurnState

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
class _Group:
    """One scheduling group: its calls, their prepared stages and settled results."""

    calls: list[ToolCall]
    executions: list[ToolExecution]
    prepared: list[PreparedCall | None]
    results: list[ToolExecutionResult | None]
    # The tool that made the first call parallel, having checked its arguments (R9.8);
    # None for an exclusive call.
    lead: Tool | None
    wakeup: trio.Event = attrs.field(factory=trio.Event)
    in_flight: int = 0


async def run_tool_calls(
    core: AgentCore, state: TurnState, signal: StepSignal
) -> list[HookContext] | None:
    """Run every tool call of the step; returns contexts to inject, or ``None`` if aborted."""
    calls = list(state.calls.calls)
    executions = [_execution(core, call) for call in calls]
    contexts: list[HookContext] = []
    index = 0
    while index < len(calls):
        if signal.cancel_called:
            return None  # noqa: ASYNC910 - per step, no yield on abort: the step closes as aborted
        group = _next_group(core, calls, executions, index)
        index += await _run_group(core, state, group, contexts, signal)
        if signal.cancel_called:
            return None
    return contexts  # noqa: ASYNC910 - per step; a step without tool calls adds no scheduling point


def _execution(core: AgentCore, call: ToolCall) -> ToolExecution:
    return ToolExecution(
        call_id=call.id,
        name=call.name,
        arguments=parse_arguments(call.arguments),
        agent=core.agent,
        agent_id=core.id,
        raw_arguments=call.arguments,
    )


def _next_group(
    core: AgentCore, calls: list[ToolCall], executions: list[ToolExecution], start: int
) -> _Group:
    """The group starting at *start*: one exclusive call, or the parallel run from it.

    Only the first call is classified here (R9.13): a parallel group holds
    every remaining call, and the pool classifies each further call as it
    is about to start it, ending the group at the first exclusive one.
    """
    lead = core.services.tools.parallel_tool(executions[start])
    end = start + 1 if lead is None else len(calls)
    size = end - start
    return _Group(calls[start:end], executions[start:end], [None] * size, [None] * size, lead)


async def _run_group(
    core: AgentCore,
    state: TurnState,
    group: _Group,
    contexts: list[HookContext],
    signal: StepSignal,
) -> int:
    """Run one group with a rolling pool; returns how many of its calls it consumed.

    Before each further call of a parallel group starts, its mode is read
    again; a call that became exclusive ends the group there (R9.13).
    """
    size = len(group.calls)
    if size == 1:
        await _start(core, state, group, 0, None, signal, group.lead)
        if group.results[0] is not None:
            await _commit(core, state, group, 0, contexts)
        return 1
    async with trio.open_nursery() as nursery:
        return await _pool(core, state, group, contexts, signal, nursery)


async def _pool(
    core: AgentCore,
    state: TurnState,
    group: _Group,
    contexts: list[HookContext],
    signal: StepSignal,
    nursery: trio.Nursery,
) -> int:
    cap = core.services.max_parallel_tool_calls
    registry = core.services.tools
    end = len(group.calls)
    started = cursor = 0
    try:
        while cursor < end:
            # What is ready is committed before the next call starts (R9.14).
            if cursor < started and group.results[cursor] is not None:
                await _commit(core, state, group, cursor, contexts)
                cursor += 1
            elif started < end and group.in_flight < cap and not signal.cancel_called:
                checked_by = (
                    registry.parallel_tool(group.executions[started]) if started else group.lead
                )
                if checked_by is None:
                    end = started
                    continue
                await _start(core, state, group, started, nursery, signal, checked_by)
                started += 1
            elif cursor < started:
                await _next_settled(group)
            else:
                break  # aborted: the calls never started get synthetic results
    except Exception:
        # R9.22, T-S6: a failure of the scheduler itself (an observer raising on an
        # append) starts nothing more, but lets the bodies already running finish:
        # a tool is not cut off halfway by another's bookkeeping. The turn's error
        # path then logs what they returned.
        while group.in_flight:
            await _next_settled(group)
        raise
    return end  # noqa: ASYNC910 - runs inside the group's nursery, whose exit checkpoints


async def _next_settled(group: _Group) -> None:
    """Wait until a running body of *group* settles."""
    group.wakeup = trio.Event()
    await group.wakeup.wait()


async def _start(
    core: AgentCore,
    state: TurnState,
    group: _Group,
    index: int,
    nursery: trio.Nursery | None,
    signal: StepSignal,
    checked_by: Tool | None,
) -> None:
    """Log ``tool/call``, run pre-execute, then dispatch (inline or as a child task)."""
    call = group.calls[index]
    registry = core.services.tools
    _log_call(core, state, call)
    # The step checkpointed in the model stream; the tool body is the next one.
    prepared = await registry.prepare(
        group.executions[index], checkpoint=False, checked_by=checked_by
    )
    group.prepared[index] = prepared
    if not prepared.needs_dispatch:
        assert prepared.result is not None
        group.results[index] = prepared.result
        # A denial is this call's outcome: an abort before its commit logs it, not a
        # synthetic "never started" (R9.20).
        state.calls.settled[call.id] = (prepared, prepared.result)
        return
    if signal.cancel_called:
        return
    state.calls.started.add(call.id)
    if nursery is None:
        group.results[index] = result = await registry.dispatch(prepared)
        state.calls.settled[call.id] = (prepared, result)
        return
    group.in_flight += 1
    nursery.start_soon(_dispatch, core, state, group, index, prepared)


def _log_call(core: AgentCore, state: TurnState, call: ToolCall) -> None:
    """Append ``tool/call``; remember its seq even if an observer raised (R4.8)."""
    session = core.session
    try:
        event = session.append(
            ToolCallEvent(state.turn, state.step, call.id, call.name, call.arguments)
        )
    except Exception:
        last = session.events[-1]
        if isinstance(last.data, ToolCallEvent) and last.data.call_id == call.id:
            state.calls.call_seqs[call.id] = last.seq
        raise
    state.calls.call_seqs[call.id] = event.seq


async def _dispatch(
    core: AgentCore, state: TurnState, group: _Group, index: int, prepared: PreparedCall
) -> None:
    try:
        group.results[index] = result = await core.services.tools.dispatch(prepared)
        # Kept for an abort that lands before its turn in the commit order comes.
        state.calls.settled[group.calls[index].id] = (prepared, result)
    finally:
        group.in_flight -= 1
        group.wakeup.set()


async def _commit(
    core: AgentCore, state: TurnState, group: _Group, index: int, contexts: list[HookContext]
) -> None:
    """Run post-execute for one settled call and append its ``tool/result`` (R9.17)."""
    call = group.calls[index]
    prepared, result = group.prepared[index], group.results[index]
    assert prepared is not None
    assert result is not None
    final = await core.services.tools.finish(prepared, result)
    state.calls.answered.add(call.id)
    state.log_result(call.id, final)
    if final.additional_context is not None:
        contexts.append(final.additional_context)
