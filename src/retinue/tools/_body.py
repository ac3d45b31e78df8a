"""The innermost execute step: validate the arguments, run the body under its timeout."""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Awaitable
from types import CoroutineType
from typing import cast, final

import attrs
import trio

from retinue._errors import (
    InvalidJsonError,
    ToolError,
    describe_failure,
    failure_of,
    holds_cancel,
    pass_on,
)
from retinue._handle import AgentHandle
from retinue._lossless import FrozenDict, loads_frozen, thaw_json

from ._execution import (
    ToolExecution,
    ToolExecutionResult,
    error_result,
    exception_result,
    output_result,
)
from ._schema import ShapeBinder
from ._thread_agent import ThreadAgent, ThreadCall, end_thread_call
from ._tool import Tool, ToolContext
from ._validate import json_type_name

__all__ = [
    "ABANDONED_THREADS",
    "INVALID_ARGUMENTS",
    "TOOL_THREADS",
    "TOOL_THREADS_EXHAUSTED",
    "TOOL_TIMEOUT",
    "ToolThreads",
    "invalid_arguments",
    "run_body",
    "unreadable_arguments",
]

log = logging.getLogger("retinue.tools")

TOOL_THREADS = 40
"""Sync tool bodies running at once per registry (trio's default pool has as many)."""

ABANDONED_THREADS = 40
"""Threads per registry, beyond ``TOOL_THREADS``, that abandoned sync bodies may keep.

A sync body abandoned at its timeout (or a cancel) runs on in its thread
until it returns. A registry's sync bodies never hold more than
``TOOL_THREADS + ABANDONED_THREADS`` threads, abandoned ones included: a sync
call that finds them all taken fails at once with ``TOOL_THREADS_EXHAUSTED``,
and sync calls run again as abandoned bodies return.
"""

# How much of arguments that are not JSON the model is shown back.
_EXCERPT_CHARS = 80

INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
TOOL_TIMEOUT = "TOOL_TIMEOUT"
TOOL_THREADS_EXHAUSTED = "TOOL_THREADS_EXHAUSTED"


@final
@attrs.frozen
class ToolThreads:
    """A registry's worker threads for sync bodies, kept off trio's default pool (the stores').

    A call holds one of the ``slots`` while its body runs and gives it back
    when it abandons the body at a timeout or cancel. Every live thread holds
    one of the ``threads`` until its body returns, abandoned or not (trio
    gives it back then), so a tool that hangs on every call cannot pile up
    threads without bound.
    """

    slots: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(TOOL_THREADS))
    threads: trio.CapacityLimiter = attrs.field(
        factory=lambda: trio.CapacityLimiter(TOOL_THREADS + ABANDONED_THREADS)
    )


def invalid_arguments(execution: ToolExecution, problem: str) -> ToolExecutionResult:
    """The ``INVALID_ARGUMENTS`` error result for *problem* (``"<path>: <what>"``)."""
    return error_result(
        execution.call_id,
        f'invalid arguments for tool "{execution.name}": {problem}',
        code=INVALID_ARGUMENTS,
    )


def unreadable_arguments(execution: ToolExecution, exc: BaseException) -> ToolExecutionResult:
    """The ``INVALID_ARGUMENTS`` result of arguments that could not be frozen (R9.3 stage 1).

    Raises:
        BaseException: what of *exc* passes on: Ctrl-C, a real cancel.
    """
    if isinstance(exc, InvalidJsonError):
        return invalid_arguments(execution, str(exc))
    # A container of the caller's whose reading raises (a Mapping's items(), a list's
    # __iter__) is no JSON either: its error must not escape the never-raising pipeline.
    failure = failure_of(exc, "reading them", ToolError)
    return invalid_arguments(
        execution, f"arguments: could not be read: {describe_failure(failure)}"
    )


def _argument_problem(tool: Tool, execution: ToolExecution) -> str | None:
    arguments = execution.arguments
    if isinstance(arguments, str):
        # R9.6 passes the model's text on raw: what it got wrong is the JSON, not the type.
        unparsed = _unparsed_problem(arguments, execution.raw_arguments)
        if unparsed is not None:
            return f"arguments: {unparsed}"
    problem = tool.check_arguments(arguments)
    if problem is None and not isinstance(arguments, dict):
        problem = f"arguments: expected object, got {json_type_name(arguments)}"
    return problem


def _unparsed_problem(arguments: str, raw: str | None) -> str | None:
    """Why string *arguments* are the model's text left raw, or ``None`` if they are not."""
    # Parsed JSON never equals its own text: a JSON string keeps its quotes there.
    if raw is not None and arguments != raw:
        return None
    try:
        loads_frozen(arguments)
    except InvalidJsonError as exc:
        # JSON that no value can hold: a number too long or out of range says so.
        return str(exc)
    except json.JSONDecodeError as exc:
        return f"not valid JSON: {_broken_at(arguments, exc)}"
    except ValueError:
        return f"not valid JSON: {_excerpt(arguments)}"
    # Only when the loop did not parse them: valid JSON text is the value itself.
    return None if raw is None else f"not valid JSON: {_excerpt(arguments)}"


def _excerpt(text: str) -> str:
    if len(text) <= _EXCERPT_CHARS:
        return repr(text)
    return f"{text[:_EXCERPT_CHARS]!r}..."


def _broken_at(text: str, exc: json.JSONDecodeError) -> str:
    """The text, or where in it the JSON breaks and why, with the text around that point.

    Shown whole, a short text shows its mistake. Of a long one, its start may hold none
    (an unescaped quote deep in a long string, say): the model is shown the point itself.
    """
    if len(text) <= _EXCERPT_CHARS:
        return repr(text)
    start = max(0, min(exc.pos - _EXCERPT_CHARS // 2, len(text) - _EXCERPT_CHARS))
    end = start + _EXCERPT_CHARS
    around = f"{'...' if start else ''}{text[start:end]!r}{'...' if end < len(text) else ''}"
    return f"broken at character {exc.pos} of {len(text)} ({exc.msg}): {around}"


def _keyword_arguments(tool: Tool, execution: ToolExecution) -> dict[str, object]:
    bind, arguments = tool.bind, execution.arguments
    if type(bind) is ShapeBinder and type(arguments) is FrozenDict:
        # The decorator's binder thaws each value itself: no plain copy of the whole first.
        kwargs = bind(arguments)
    else:
        plain = thaw_json(arguments)
        assert isinstance(plain, dict)
        kwargs = bind(plain) if bind is not None else {str(k): v for k, v in plain.items()}
    if tool.context_parameter is not None:
        agent = execution.agent
        if not tool.is_async and agent is not None:
            # The worker thread must reach the agent through the trio thread, and only
            # while the call lasts: _call_in_thread ends it. Typed as the handle it
            # stands in for: it forwards every verb to it.
            call = ThreadCall(tool.name, execution.call_id)
            token = trio.lowlevel.current_trio_token()
            agent = cast("AgentHandle", ThreadAgent(agent, token, call))
        kwargs[tool.context_parameter] = ToolContext(execution.call_id, agent, execution.agent_id)
    return kwargs


def _call(
    tool: Tool,
    kwargs: dict[str, object],
    pool: ToolThreads,
    started: trio.Event | None = None,
) -> Awaitable[object]:
    """The body's awaitable; an async body's own coroutine is awaited directly.

    *started*, if given, is set once a sync body holds its slot and runs.
    """
    if not tool.is_async:
        return _call_in_thread(tool, kwargs, pool, started)
    value = tool.call(**kwargs)
    if type(value) is CoroutineType:
        return value
    return _awaited_return(value)


async def _call_in_thread(
    tool: Tool, kwargs: dict[str, object], pool: ToolThreads, started: trio.Event | None
) -> object:
    try:
        async with pool.slots:
            if not pool.threads.available_tokens:
                # Holding a slot, this call finds every thread taken: abandoned bodies
                # hold more than ABANDONED_THREADS of them. Waiting could take forever.
                raise _threads_exhausted(tool)
            if started is not None:
                started.set()
            # Abandoned on cancel: the worker thread runs on and its result is discarded,
            # while the slot goes back with this task (its thread token stays held).
            value = await trio.to_thread.run_sync(
                functools.partial(_run_sync_body, tool, kwargs),
                thread_name=f"retinue tool {tool.name}",
                abandon_on_cancel=True,
                limiter=pool.threads,
            )
        if type(value) is _Raised:
            raise value.take()
        return await _awaited_return(value)
    finally:
        # Answered, cancelled or timed out: a thread running on must not reach the
        # agent in a later turn through the handle it was given (R2.25, R9.20).
        if tool.context_parameter is not None:
            context = kwargs[tool.context_parameter]
            assert isinstance(context, ToolContext)
            end_thread_call(context.agent)


def _threads_exhausted(tool: Tool) -> ToolError:
    return ToolError(
        f'tool "{tool.name}" did not run: sync tools already hold all '
        f"{TOOL_THREADS + ABANDONED_THREADS} worker threads a registry allows ({TOOL_THREADS} "
        f"running plus {ABANDONED_THREADS} kept by bodies abandoned at a timeout or cancel); "
        "threads free up as the abandoned bodies return",
        code=TOOL_THREADS_EXHAUSTED,
    )


class _Raised:
    """What a sync body raised in its worker thread, carried back to be raised in trio's.

    Raised through trio's thread machinery, the error would be held by the
    frames its traceback holds, a cycle left to the cyclic collector with the
    body's frames and every value they hold, at each failed call.
    """

    __slots__ = ("_error",)

    def __init__(self, error: BaseException) -> None:
        self._error: BaseException | None = error

    def take(self) -> BaseException:
        """The error, let go of here: the frame raising it holds this carrier."""
        error, self._error = self._error, None
        assert error is not None
        return error


def _run_sync_body(tool: Tool, kwargs: dict[str, object]) -> object:
    """Call a sync body in its worker thread; what it raises comes back as a :class:`_Raised`."""
    try:
        return _sync_body_value(tool, kwargs)
    except BaseException as exc:
        return _Raised(exc)


def _sync_body_value(tool: Tool, kwargs: dict[str, object]) -> object:
    """Call a sync body; a coroutine it returns is closed, not leaked."""
    try:
        value = tool.call(**kwargs)
    except StopIteration as exc:
        # Raised on into the awaiting coroutine it would read "coroutine raised
        # StopIteration" (PEP 479), naming a coroutine this body does not have.
        raise RuntimeError(describe_failure(exc)) from exc
    if inspect.iscoroutine(value):
        # Nothing in this thread can await it: an async function behind a sync wrapper
        # that does not name it in ``__wrapped__``.
        value.close()
        raise TypeError(
            f'tool "{tool.name}" runs as a sync function in a worker thread but returned '
            "a coroutine, which was closed unawaited: make the body async, or let its "
            "wrapper keep __wrapped__ (functools.wraps)"
        )
    return value


async def _awaited_return(value: object) -> object:
    """A body's return that is not a coroutine: awaited if awaitable, else a checkpoint first."""
    if inspect.isawaitable(value):
        return await value
    await trio.lowlevel.checkpoint()
    return value


async def run_body(
    tool: Tool, execution: ToolExecution, pool: ToolThreads, *, arguments_checked: bool = False
) -> ToolExecutionResult:
    """Validate *execution*'s arguments against *tool*, run its body, convert the return.

    Waits for the body (an async body is awaited in this task, a sync one runs
    in a worker thread of *pool* once it holds one of its slots; a timed-out
    sync body's thread is abandoned and gives its slot back, and once abandoned
    threads leave the pool none, the call fails with ``TOOL_THREADS_EXHAUSTED``
    without running the body). A cancel point on entry; the
    body itself is the schedule point (a sync body's thread, a returned awaitable
    or value gets one after it; an async body that never awaits gives none,
    which :meth:`ToolRegistry.dispatch` adds). Never raises for a tool failure: invalid
    arguments, a raise, a timeout and an unconvertible return value all become
    error results, as does a BaseException of the body's own (``SystemExit``, a
    subclass of the user's). Ctrl-C propagates, bare or in the group of the body's
    nursery, and so does ``Cancelled`` from an enclosing scope; the tool's
    own timeout does not, nor a ``Cancelled`` the body raises while no scope
    around it is cancelled (one it caught inside and re-raised): that is an
    error result naming the misuse. *arguments_checked* says ``tool.check_arguments``
    already found these arguments valid.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    # Checked arguments passed the root's "type": "object", which every tool's schema
    # has: they are an object, so there is nothing left to find.
    if not arguments_checked:
        problem = _argument_problem(tool, execution)
        if problem is not None:
            return invalid_arguments(execution, problem)
    try:
        kwargs = _keyword_arguments(tool, execution)
    except BaseException as exc:
        # Converting runs user code (a record's constructor, a predicate): its SystemExit
        # or own BaseException refuses these arguments, it must not end the runtime (R9.2).
        failure = failure_of(exc, "converting them", ToolError)
        return invalid_arguments(execution, describe_failure(failure))
    try:
        if tool.timeout is None:
            return output_result(execution.call_id, await _call(tool, kwargs, pool))
        return await _run_within(tool.timeout, tool, execution.call_id, kwargs, pool)
    except BaseException as exc:
        # Ctrl-C and a real cancel are raised again, to reach the runtime and their
        # scope (of a group, only they are). Anything else is the call's error result
        # (R9.2): a SystemExit (argparse in a sync tool, say) must not take the runtime
        # down, and a stray cancel, bare or grouped, would end the agent's driver as
        # if it had been cancelled.
        pass_on(exc)
        if holds_cancel(exc):
            log.warning("tool %r raised a stray trio.Cancelled", tool.name, exc_info=exc)
            return exception_result(
                execution.call_id, failure_of(exc, f'tool "{tool.name}"', ToolError)
            )
        return exception_result(execution.call_id, exc)


async def _run_within(
    limit: float, tool: Tool, call_id: str, kwargs: dict[str, object], pool: ToolThreads
) -> ToolExecutionResult:
    # Only a sync body can time out before it starts (waiting for a slot).
    started = None if tool.is_async else trio.Event()
    with trio.move_on_after(limit) as scope:
        value = await _call(tool, kwargs, pool, started)
    if scope.cancelled_caught:
        return _timed_out(tool, call_id, started=started is None or started.is_set())
    return output_result(call_id, value)


def _timed_out(tool: Tool, call_id: str, *, started: bool) -> ToolExecutionResult:
    assert tool.timeout is not None
    limit = f"{_seconds(tool.timeout)}s"
    if started:
        message = f'tool "{tool.name}" timed out after {limit}'
    else:
        message = f'tool "{tool.name}" did not run: no worker thread free within {limit}'
    return error_result(call_id, message, code=TOOL_TIMEOUT)


def _seconds(timeout: float) -> str:
    """*timeout* as written: ``5`` for ``5.0``, but every digit of ``1234567`` (``g`` keeps six)."""
    # The plain number: a subclass's format or repr may add a unit or its type's name.
    plain = int(timeout) if isinstance(timeout, int) else float(timeout)
    short = f"{plain:g}"
    return short if float(short) == plain else repr(plain)
