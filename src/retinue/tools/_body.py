"""The innermost execute step: validate the arguments, run the body under its timeout."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable
from types import CoroutineType

import trio

from retinue._errors import describe_error
from retinue._lossless import thaw_json

from ._execution import (
    ToolExecution,
    ToolExecutionResult,
    error_result,
    exception_result,
    output_result,
)
from ._tool import Tool, ToolContext
from ._validate import json_type_name

__all__ = ["INVALID_ARGUMENTS", "TOOL_THREADS", "TOOL_TIMEOUT", "invalid_arguments", "run_body"]

TOOL_THREADS = 40
"""Sync tool bodies running at once per registry (trio's default pool has as many)."""

# What a tool body may raise that is its own failure (R9.2): a SystemExit (argparse in a
# sync tool, say) must not take the runtime down. Cancelled and KeyboardInterrupt pass.
_TOOL_FAILURES = (Exception, SystemExit, GeneratorExit)

INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
TOOL_TIMEOUT = "TOOL_TIMEOUT"


def invalid_arguments(execution: ToolExecution, problem: str) -> ToolExecutionResult:
    """The ``INVALID_ARGUMENTS`` error result for *problem* (``"<path>: <what>"``)."""
    return error_result(
        execution.call_id,
        f'invalid arguments for tool "{execution.name}": {problem}',
        code=INVALID_ARGUMENTS,
    )


def _keyword_arguments(tool: Tool, execution: ToolExecution) -> dict[str, object]:
    plain = thaw_json(execution.arguments)
    assert isinstance(plain, dict)
    kwargs = tool.bind(plain) if tool.bind is not None else {str(k): v for k, v in plain.items()}
    if tool.context_parameter is not None:
        kwargs[tool.context_parameter] = ToolContext(
            execution.call_id, execution.agent, execution.agent_id
        )
    return kwargs


def _call(
    tool: Tool, kwargs: dict[str, object], threads: trio.CapacityLimiter | None
) -> Awaitable[object]:
    """The body's awaitable; an async body's own coroutine is awaited directly."""
    if not tool.is_async:
        return _call_in_thread(tool, kwargs, threads)
    value = tool.fn(**kwargs)
    if type(value) is CoroutineType:
        return value
    return _settle(value)


async def _call_in_thread(
    tool: Tool, kwargs: dict[str, object], threads: trio.CapacityLimiter | None
) -> object:
    # Abandoned on cancel: the worker thread runs on, its result is discarded.
    value = await trio.to_thread.run_sync(
        functools.partial(tool.fn, **kwargs), abandon_on_cancel=True, limiter=threads
    )
    return await _settle(value)


async def _settle(value: object) -> object:
    """A body's return that is not a coroutine: awaited if awaitable, else a checkpoint first."""
    if inspect.isawaitable(value):
        return await value
    await trio.lowlevel.checkpoint()
    return value


async def run_body(
    tool: Tool, execution: ToolExecution, threads: trio.CapacityLimiter | None = None
) -> ToolExecutionResult:
    """Validate *execution*'s arguments against *tool*, run its body, convert the return.

    A sync body runs in a worker thread counted by *threads* (trio's default
    limiter when ``None``).

    Waits for the body (an async body is awaited in this task, a sync one runs
    in a worker thread). A cancel point on entry; the body itself is the
    schedule point (a body that returns without awaiting anything gets one
    after it). Never raises for a tool failure: invalid arguments, a raise, a timeout and an
    unconvertible return value all become error results. ``Cancelled`` from an
    enclosing scope propagates; the tool's own timeout does not.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    problem = tool.check_arguments(execution.arguments)
    if problem is None and not isinstance(execution.arguments, dict):
        problem = f"arguments: expected object, got {json_type_name(execution.arguments)}"
    if problem is not None:
        return invalid_arguments(execution, problem)
    try:
        kwargs = _keyword_arguments(tool, execution)
    except Exception as exc:
        return invalid_arguments(execution, describe_error(exc))
    try:
        if tool.timeout is None:
            return output_result(execution.call_id, await _call(tool, kwargs, threads))
        limit = tool.timeout
        with trio.move_on_after(limit) as scope:
            value = await _call(tool, kwargs, threads)
        if scope.cancelled_caught:
            return error_result(
                execution.call_id,
                f'tool "{tool.name}" timed out after {limit:g}s',
                code=TOOL_TIMEOUT,
            )
        return output_result(execution.call_id, value)
    except _TOOL_FAILURES as exc:
        return exception_result(execution.call_id, exc)
