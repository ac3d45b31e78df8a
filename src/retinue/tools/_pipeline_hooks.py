"""The tool pipeline's listener decisions: pre-execute, post-execute and execute wrappers (R9.3).

What a ``tools/pre-execute`` waterfall decided becomes the call's prepared
stage, a ``tools/execute`` wrapper's return must be this call's result, and a
``tools/post-execute`` decision rewrites the result. None of it needs the
registry's tables, only the hook bus, so it lives apart from them. Every
failure becomes an error result, or a ``HookError`` the registry turns into
one, so the pipeline stays never-raising (R9.2).
"""

from __future__ import annotations

import logging

import attrs
import trio

from retinue._content import ContentBlock, Text
from retinue._errors import HookError
from retinue.hooks import Accept, Allow, Ask, Block, Deny, HookBus
from retinue.hooks._results import Takes

from ._execution import (
    PreparedCall,
    ToolExecution,
    ToolExecutionResult,
    error_result,
    exception_result,
    result_content,
)
from ._paths import shown_name

__all__ = [
    "UNKNOWN_TOOL",
    "check_dispatched",
    "dispatch_takes",
    "post_execute",
    "pre_execute",
    "unknown_tool",
]

log = logging.getLogger("retinue.tools")
UNKNOWN_TOOL = "UNKNOWN_TOOL"


async def pre_execute(hooks: HookBus, execution: ToolExecution) -> PreparedCall:
    """The ``tools/pre-execute`` waterfall's decision: a go, a denial or a failure.

    Waits for the listeners; never raises except ``Cancelled``. The caller has
    just checkpointed.
    """

    async def allow() -> Allow:
        return Allow()  # noqa: ASYNC910 - a default value; prepare checkpointed

    try:
        decision = await hooks.waterfall(
            "tools/pre-execute", allow, execution, scope=execution.agent_id
        )
    except Exception as exc:
        log.exception("tools/pre-execute failed for %r", execution.name)
        return PreparedCall(  # noqa: ASYNC910 - checkpoint=False: the caller has just checkpointed
            execution, exception_result(execution.call_id, exc), needs_post_execute=False
        )
    return _decide(execution, decision)


def _decide(execution: ToolExecution, decision: Allow | Deny | Ask) -> PreparedCall:
    if isinstance(decision, Ask):
        # Named as the model wrote it, cut short: no tool need have that name.
        reason = decision.reason or (
            f"tool {shown_name(execution.name)} requires approval (not yet supported)"
        )
        decision = Deny(reason)
    if isinstance(decision, Deny):
        return PreparedCall(execution, error_result(execution.call_id, decision.reason))
    if isinstance(decision, Allow):
        # A bare Allow: the bus refuses one with content as its listener returns it.
        return PreparedCall(execution)
    # The bus refuses anything else as its listener returns it; were that check ever
    # missing, the call must fail closed, not run.
    failure = exception_result(execution.call_id, _invalid_result("tools/pre-execute", decision))
    return PreparedCall(execution, failure, needs_post_execute=False)


def check_dispatched(execution: ToolExecution, result: object) -> None:
    """Refuse what a ``tools/execute`` wrapper returned unless it is *execution*'s result.

    Each wrapper's result is refused as it returns (:func:`dispatch_takes`), naming
    the wrapper; checked again here, a result the bus let through fails closed.

    Raises:
        HookError: *result* is not a :class:`ToolExecutionResult`, is another call's, or
            holds a block no result may (a tool call, a tool result, reasoning).
    """
    if not isinstance(result, ToolExecutionResult):
        raise _invalid_result("tools/execute", result)
    flaw = _dispatch_flaw(execution, result)
    if flaw is not None:
        raise HookError(f"tools/execute returned {flaw}")


def dispatch_takes(execution: ToolExecution) -> Takes:
    """What the ``tools/execute`` wrappers of *execution* may return: its own result."""

    def flaw(result: object) -> str | None:
        return _dispatch_flaw(execution, result)

    def accepts(result: object) -> bool:
        return isinstance(result, ToolExecutionResult) and flaw(result) is None

    return Takes(accepts, f'a ToolExecutionResult for call "{execution.call_id}"', flaw)


def _dispatch_flaw(execution: ToolExecution, result: object) -> str | None:
    """What makes *result*, a result, unusable for *execution*, as errors say it; else None."""
    if not isinstance(result, ToolExecutionResult):
        return None
    if result.call_id != execution.call_id:
        return f'a result for call "{result.call_id}", expected "{execution.call_id}"'
    try:
        result_content(result.content, "the result")
    except ValueError as exc:
        return f"an unusable result: {exc}"
    return None


async def unknown_tool(execution: ToolExecution) -> ToolExecutionResult:
    """The body of a call no tool in its agent's view answers to; always a checkpoint."""
    await trio.lowlevel.checkpoint()
    message = f"unknown tool {shown_name(execution.name)}"
    return error_result(execution.call_id, message, code=UNKNOWN_TOOL)


async def post_execute(
    hooks: HookBus, execution: ToolExecution, result: ToolExecutionResult
) -> ToolExecutionResult:
    """*result* as the ``tools/post-execute`` waterfall decided it.

    Waits for the listeners. Always a checkpoint; never raises except
    ``Cancelled``: a raising listener or a non-decision gives an error result.
    """

    async def accept() -> Accept:
        return Accept()  # noqa: ASYNC910 - a default value; post_execute checkpoints first

    await trio.lowlevel.checkpoint()
    try:
        decision = await hooks.waterfall(
            "tools/post-execute", accept, execution, result, scope=execution.agent_id
        )
        return _apply_post(result, decision)
    except Exception as exc:
        log.exception("tools/post-execute failed for %r", execution.name)
        return exception_result(execution.call_id, exc)


def _apply_post(result: ToolExecutionResult, decision: Accept | Block) -> ToolExecutionResult:
    """Apply a post-execute decision (R6.9); the call id never changes."""
    if not isinstance(decision, Accept | Block):
        raise _invalid_result("tools/post-execute", decision)
    if isinstance(decision, Accept):
        if decision.content is not None:
            content = _held_to_a_result(decision.content, "tools/post-execute's Accept")
            result = attrs.evolve(result, content=content)
    else:
        # Empty feedback counts as none: the reason stands in for it.
        feedback = decision.feedback
        if feedback:
            content = _held_to_a_result(feedback, "tools/post-execute's Block feedback")
        else:
            content = (Text(f"Error: {decision.reason}"),)
        result = attrs.evolve(result, content=content, is_error=True)
    if decision.additional_context is not None:
        result = attrs.evolve(result, additional_context=decision.additional_context)
    return result


def _held_to_a_result(content: tuple[ContentBlock, ...], owner: str) -> tuple[ContentBlock, ...]:
    """*content* a listener gives a result, refused as a result's own is (``HookError``)."""
    try:
        return result_content(content, owner)
    except ValueError as exc:
        raise HookError(str(exc)) from None


def _invalid_result(seam: str, value: object) -> HookError:
    return HookError(f"{seam} returned an invalid result: {type(value).__name__}")
