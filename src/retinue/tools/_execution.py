"""Execution values: one call's input, its result, its prepared stage, and error results."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any, final

import attrs

from retinue._content import (
    ContentBlock,
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
    as_content,
    refuse_blocks,
    says_nothing,
    wrong_type,
)
from retinue._errors import InvalidJsonError, RetinueError, describe_failure, leaf_error
from retinue._handle import AgentHandle
from retinue._lossless import JsonValue, freeze_json
from retinue._slots import slot_setters
from retinue._sources import HookContext
from retinue.session import ToolErrorInfo

from ._tool import Tool, ToolOutput

__all__ = [
    "PreparedCall",
    "ToolExecution",
    "ToolExecutionResult",
    "check_result",
    "error_info",
    "error_result",
    "exception_result",
    "output_result",
    "result_content",
]

_BLOCKS = (Text, Reasoning, RedactedReasoning, ToolCall, ToolResultBlock, OpaqueBlock)


_TOKENS = itertools.count(1)
_TOKEN_PREFIX = uuid.uuid4().hex[:12]


def _fresh_token() -> str:
    # Unique per process run without paying for a uuid per call.
    return f"{_TOKEN_PREFIX}-{next(_TOKENS)}"


@final
@attrs.frozen(init=False)
class ToolExecution:
    """One tool call as the pipeline sees it (R9.1); every field is immutable.

    The registry freezes ``arguments`` before any seam sees them; ``token`` is
    a fresh opaque id per execution, so two calls never share an identity. A str
    field given a str subclass (a ``StrEnum`` member) holds its text as a plain str.

    Raises:
        TypeError: ``call_id``, ``name`` or ``token`` is no str, or ``agent_id``
            or ``raw_arguments`` neither a str nor None (the message names the
            field). Arguments that are no JSON are the call's error result instead.
    """

    call_id: str
    """The model's id of the call."""
    name: str
    """The tool name the model asked for."""
    arguments: JsonValue
    """The parsed arguments, or the raw text when the model's JSON was invalid (R9.6)."""
    agent: AgentHandle | None = None
    """The calling agent's handle (opaque to the registry), or ``None``."""
    agent_id: str | None = None
    """The calling agent's id: it scopes the tool view and every seam dispatch."""
    token: str = attrs.field(factory=_fresh_token, kw_only=True)
    """A fresh opaque id for this execution."""
    raw_arguments: str | None = attrs.field(default=None, kw_only=True, repr=False)
    """The model's text of the arguments, when the loop parsed them; else ``None``."""

    # Written by hand, checking the types attrs would not: one is built for every
    # call, and a wrong one unchecked would fail far away, when the call's result is logged.
    def __init__(
        self,
        call_id: str,
        name: str,
        arguments: JsonValue,
        agent: AgentHandle | None = None,
        agent_id: str | None = None,
        *,
        token: str | None = None,
        raw_arguments: str | None = None,
    ) -> None:
        if token is None:
            token = f"{_TOKEN_PREFIX}-{next(_TOKENS)}"  # _fresh_token, written out: one a call
        # One test of the common case: the loop's call id, name, token and text.
        if not (
            type(call_id) is type(name) is type(token) is str
            and (agent_id is None or type(agent_id) is str)
            and (raw_arguments is None or type(raw_arguments) is str)
        ):
            call_id, name, token, agent_id, raw_arguments = _plain_strs(
                self, call_id, name, token, agent_id, raw_arguments
            )
        set_call_id, set_name, set_arguments, set_agent, set_agent_id, set_token, set_raw = (
            _SET_EXECUTION
        )
        set_call_id(self, call_id)
        set_name(self, name)
        set_arguments(self, arguments)
        set_agent(self, agent)
        set_agent_id(self, agent_id)
        set_token(self, token)
        set_raw(self, raw_arguments)


_SET_EXECUTION = slot_setters(
    ToolExecution, "call_id", "name", "arguments", "agent", "agent_id", "token", "raw_arguments"
)


def _plain_strs(execution: ToolExecution, *values: Any) -> tuple[Any, ...]:
    """*values* (``call_id`` to ``raw_arguments``), each str subclass as the str it holds.

    A ``StrEnum`` member passes, as ``isinstance`` would have it, but is kept as its
    text: a message naming the call would show a subclass's own ``__str__``.

    Raises:
        TypeError: the first of *values* that is no str (nor None where that is allowed).
    """
    names = ("call_id", "name", "token", "agent_id", "raw_arguments")
    for index, (field, value) in enumerate(zip(names, values, strict=True)):
        optional = index >= 3
        if isinstance(value, str) or (optional and value is None):
            continue
        raise wrong_type(execution, field, "a str or None" if optional else "a str", value)
    return tuple(value if value is None else str.__str__(value) for value in values)


@final
@attrs.frozen(init=False)
class ToolExecutionResult:
    """The outcome of one call (R9.2): content for the model plus error and meta data."""

    call_id: str
    """The call this result answers; a wrapper may not change it."""
    content: tuple[ContentBlock, ...]
    """What the model sees."""
    is_error: bool = False
    """Whether the call failed (the model sees the content either way)."""
    error: ToolErrorInfo | None = None
    """A coded harness error (``UNKNOWN_TOOL``, ``INVALID_ARGUMENTS``, ...), else ``None``."""
    meta: JsonValue = None
    """Lossless JSON recorded with the result, not shown to the model."""
    additional_context: HookContext | None = None
    """Context from post-execute for the loop to inject after the results (R9.4); one that
    says nothing (no block, or only text of whitespace) is taken as none, as a decision's is."""

    # Written by hand, converting as attrs would (content, then meta): one is built
    # for every call, mostly without meta, which needs no freezing then.
    def __init__(
        self,
        call_id: str,
        content: str | ContentBlock | Sequence[ContentBlock],
        is_error: bool = False,  # noqa: FBT001, FBT002 - a field, positional as attrs made it
        error: ToolErrorInfo | None = None,
        meta: object = None,
        additional_context: HookContext | None = None,
    ) -> None:
        blocks = as_content(content)
        set_call_id, set_content, set_is_error, set_error, set_meta, set_context = _SET_RESULT
        set_call_id(self, call_id)
        set_content(self, blocks)
        set_is_error(self, is_error)
        set_error(self, error)
        set_meta(self, None if meta is None else freeze_json(meta, "meta"))
        if type(additional_context) is HookContext and says_nothing(additional_context.content):
            additional_context = None  # shown, an empty <context> block saying nothing
        set_context(self, additional_context)


_SET_RESULT = slot_setters(
    ToolExecutionResult, "call_id", "content", "is_error", "error", "meta", "additional_context"
)


@final
@attrs.frozen(init=False)
class PreparedCall:
    """A call after the pre-execute stage (R9.15).

    Either it must be dispatched (``result is None``), or it carries a
    pre-produced result: a denial (which still goes through post-execute) or a
    pipeline failure (which is final).
    """

    execution: ToolExecution
    """The execution, with its arguments frozen."""
    result: ToolExecutionResult | None = None
    """The pre-produced result, if the call is not to be dispatched."""
    needs_post_execute: bool = True
    """Whether ``tools/post-execute`` still applies to this call's result."""
    checked_by: Tool | None = attrs.field(default=None, kw_only=True, eq=False, repr=False)
    """The tool that found the arguments valid when the call was classified, if any."""

    # Written by hand, as attrs would: one is built for every call.
    def __init__(
        self,
        execution: ToolExecution,
        result: ToolExecutionResult | None = None,
        needs_post_execute: bool = True,  # noqa: FBT001, FBT002 - a field, positional as attrs made it
        *,
        checked_by: Tool | None = None,
    ) -> None:
        set_execution, set_result, set_needs_post_execute, set_checked_by = _SET_PREPARED
        set_execution(self, execution)
        set_result(self, result)
        set_needs_post_execute(self, needs_post_execute)
        set_checked_by(self, checked_by)

    @property
    def needs_dispatch(self) -> bool:
        """Whether the call's body (the ``tools/execute`` stage) must run."""
        return self.result is None


_SET_PREPARED = slot_setters(
    PreparedCall, "execution", "result", "needs_post_execute", "checked_by"
)


def error_info(exc: BaseException) -> ToolErrorInfo | None:
    """The coded error of a retinue exception that carries a code, else ``None``."""
    if isinstance(exc, RetinueError) and isinstance(exc.code, str):
        return ToolErrorInfo(type(exc).__name__, exc.code)  # a subclass held as its text
    return None


def error_result(call_id: str, message: str, *, code: str | None = None) -> ToolExecutionResult:
    """An ``Error: <message>`` result; *code* makes it a coded harness error."""
    error = None if code is None else ToolErrorInfo("ToolError", code)
    return ToolExecutionResult(call_id, (Text(f"Error: {message}"),), is_error=True, error=error)


def exception_result(call_id: str, exc: BaseException) -> ToolExecutionResult:
    """An error result for a raised exception (R9.2); a code is kept (``ToolError``).

    A group (a nursery's) is reported by its errors: one stands for the group,
    code and all; several are joined, with the code they all carry, if any.
    """
    exc = leaf_error(exc)
    if isinstance(exc, BaseExceptionGroup):
        return _group_result(call_id, exc)
    return ToolExecutionResult(
        call_id, (Text(f"Error: {describe_failure(exc)}"),), is_error=True, error=error_info(exc)
    )


def _group_result(call_id: str, group: BaseExceptionGroup[BaseException]) -> ToolExecutionResult:
    leaves = _leaves(group)
    message = "; ".join(describe_failure(leaf) for leaf in leaves)
    codes = {error_info(leaf) for leaf in leaves}
    error = codes.pop() if len(codes) == 1 else None
    return ToolExecutionResult(call_id, (Text(f"Error: {message}"),), is_error=True, error=error)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The errors of *group* and of the groups nested in it, in order."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(reversed(exc.exceptions))
        else:
            leaves.append(exc)
    return leaves


def output_result(call_id: str, value: object) -> ToolExecutionResult:
    """Turn a tool body's return value into a result.

    A str, a block or a non-empty sequence of blocks is the content; a
    :class:`ToolOutput` adds ``meta``; anything else must be lossless JSON and
    becomes one text block of compact JSON.

    Raises:
        InvalidJsonError: the value is none of these.
        TypeError: the value is a coroutine (closed here): the body left out an ``await``.
        ValueError: a block is the model's own (a tool call or its reasoning) or a tool
            result, which no provider shows inside a tool's result.
    """
    if type(value) is str:  # the usual return, taken before the general tests
        return ToolExecutionResult(call_id, (Text(value),))
    if isinstance(value, ToolOutput):
        return ToolExecutionResult(call_id, result_content(value.content), meta=value.meta)
    return ToolExecutionResult(call_id, result_content(_content_of(value)))


# Blocks a provider drops from a tool's result: logged, they would never reach the model,
# which would read an empty result where the body returned one.
_NOT_IN_RESULTS = frozenset((ToolCall, ToolResultBlock, Reasoning, RedactedReasoning))


def result_content(
    blocks: tuple[ContentBlock, ...], owner: str = "the return value"
) -> tuple[ContentBlock, ...]:
    """*blocks*, once none of them is one the model would not be shown in a tool's result.

    Raises:
        ValueError: a block is the model's own or a tool result, naming *owner*, what gave it.
    """
    return refuse_blocks(
        blocks,
        _NOT_IN_RESULTS,
        "a tool's result cannot hold (the model is never shown it there): tool calls and "
        "reasoning are the model's, and each call's result is logged by the agent that ran "
        "it; give text, or the data as JSON",
        owner,
    )


def _content_of(value: object) -> tuple[ContentBlock, ...]:
    if isinstance(value, str):
        return (Text(str.__str__(value)),)  # a plain str, whatever str subclass came back
    if isinstance(value, _BLOCKS):
        return (value,)
    if isinstance(value, Sequence) and value and any(isinstance(v, _BLOCKS) for v in value):
        return as_content(value)
    if isinstance(value, Coroutine):
        # Left to the garbage collector it would warn "never awaited" long after the call.
        value.close()
        raise TypeError(
            "the return value is a coroutine, closed unawaited: an await is missing in "
            "the tool's body"
        )
    frozen = freeze_json(value, "the return value")
    return (Text(json.dumps(frozen, ensure_ascii=False, separators=(",", ":"))),)


def check_result(result: ToolExecutionResult) -> None:
    """Check that a result is lossless JSON all the way down (stage 5 of R9.3).

    Its ``meta`` needs no check: the result froze it when it was built.

    Raises:
        InvalidJsonError: a field of a block, or the error, is not JSON.
    """
    _check_blocks(result.content, "content")
    if not isinstance(result.is_error, bool):
        raise InvalidJsonError("is_error is not a bool")
    if result.error is not None:
        if not isinstance(result.error, ToolErrorInfo):
            raise InvalidJsonError("error is not a ToolErrorInfo")
        freeze_json(attrs.asdict(result.error), "error")
    if result.additional_context is not None:
        _check_blocks(result.additional_context.content, "additional_context")


def _check_blocks(blocks: object, path: str) -> None:
    if not isinstance(blocks, tuple):
        raise InvalidJsonError(f"{path} is not a tuple of content blocks")
    for block in blocks:
        # The common block, and a str is lossless JSON: no index is counted for it.
        if type(block) is not Text or type(block.text) is not str:
            _check_each_block(blocks, path)
            return


def _check_each_block(blocks: tuple[object, ...], path: str) -> None:
    for index, block in enumerate(blocks):
        if type(block) is Text and type(block.text) is str:
            continue
        where = f"{path}[{index}]"
        if not isinstance(block, _BLOCKS):
            raise InvalidJsonError(f"{where} is not a content block: {type(block).__name__}")
        for field in attrs.fields(type(block)):
            value = getattr(block, field.name)
            if isinstance(block, ToolResultBlock) and field.name == "content":
                _check_blocks(value, f"{where}.content")
            else:
                freeze_json(value, f"{where}.{field.name}")
