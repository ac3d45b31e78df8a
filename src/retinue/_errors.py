"""The retinue exception family.

::

    RetinueError
    ├── InvalidJsonError          a payload is not lossless JSON (R1.6)
    ├── SessionError              a session log operation was refused (carries ``code``)
    │   └── CorruptSessionError   a stored log cannot be loaded
    ├── AgentError
    │   ├── AgentDisposedError    a driving verb on a disposed agent (R2.37)
    │   ├── AgentNotReadyError    a driving verb before publication (R2.9)
    │   └── StepLimitError        a turn reached its agent's ``max_steps``
    ├── ConfigError               invalid options or runtime configuration
    ├── HookError                 a seam returned an invalid decision
    │   └── HookTimeoutError      the ``session/flush`` listeners alone ran late
    ├── ModelError                a model call failed (carries ``code``)
    │   └── NoAdapterError / DuplicateAdapterError
    ├── ToolError                 raised by tools to produce a coded error result
    └── StoreError                a store refused or failed an operation (carries ``code``)
        └── StoreTimeoutError     a flush or detach ran past ``flush_timeout``

``StepAborted`` is a control-flow signal, not an error.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import TypeVar

import trio

__all__ = [
    "FAILURE_OF_TAKES",
    "STRAY_CANCEL_RULE",
    "AgentDisposedError",
    "AgentError",
    "AgentNotReadyError",
    "ConfigError",
    "CorruptSessionError",
    "DuplicateAdapterError",
    "HookError",
    "HookTimeoutError",
    "InvalidJsonError",
    "ModelError",
    "NoAdapterError",
    "RetinueError",
    "SessionError",
    "StepLimitError",
    "StoreError",
    "StoreTimeoutError",
    "ToolError",
    "call_each",
    "cancel_is_stray",
    "describe_error",
    "describe_failure",
    "error_code",
    "failure_of",
    "holds_cancel",
    "is_interrupt",
    "leaf_error",
    "only_cancels",
    "pass_on",
    "passes_on",
    "raised_message",
    "stray_cancel_error",
    "synchronous_failure",
    "synchronous_failure_of",
    "unknown_failure_error",
]

log = logging.getLogger("retinue")


class RetinueError(Exception):
    """Base class of every error retinue raises on purpose."""

    code: str | None = None

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            given: object = code  # a caller without a type checker may pass anything
            if not isinstance(given, str):
                # Dropped later (a tool's result keeps only a str code): refused here instead.
                raise TypeError(f"{type(self).__name__} code must be a str, got {code!r}")
            if code:  # an empty one names nothing: the error has no code of its own
                self.code = code

    @property
    def message(self) -> str:
        """The human-readable message."""
        return str(self.args[0]) if self.args else ""


class InvalidJsonError(RetinueError, TypeError):
    """A value is not losslessly JSON-representable; the message names where."""

    code = "INVALID_JSON"


class SessionError(RetinueError):
    """A session log operation was refused; ``code`` says why."""


class CorruptSessionError(SessionError):
    """A stored session log cannot be loaded (corrupt row, seq gap, wrong version)."""

    code = "CORRUPT_SESSION"


class AgentError(RetinueError):
    """An agent verb was refused."""


class AgentDisposedError(AgentError):
    """The agent is disposed; driving verbs raise this (R2.37)."""

    code = "AGENT_DISPOSED"


class AgentNotReadyError(AgentError):
    """The agent is not yet published; driving verbs are locked (R2.9)."""

    code = "AGENT_NOT_READY"


class StepLimitError(AgentError):
    """A turn ran its agent's ``max_steps`` and its model's tool calls (or a
    turn-continuation listener) asked for another step: the turn ends ``error`` with this
    code, its last step's tool calls answered."""

    code = "MAX_STEPS"


class ConfigError(RetinueError, ValueError):
    """Invalid options or configuration."""

    code = "INVALID_CONFIG"


class HookError(RetinueError):
    """A seam listener returned a value the seam does not accept."""

    code = "INVALID_HOOK_RESULT"


class HookTimeoutError(HookError, TimeoutError):
    """A turn's flush ran past ``flush_timeout`` in its ``session/flush`` listeners alone.

    The store's flush ended in time: written, or its own failure reported
    beside this one. Also a ``TimeoutError``, as :class:`StoreTimeoutError` is.
    """

    code = "FLUSH_TIMEOUT"


class ModelError(RetinueError):
    """A model call failed; ``code`` carries the provider's or retinue's code."""

    status: int | None = None

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message, code=code)
        self.status = status


class NoAdapterError(ModelError):
    """No model adapter serves the requested (provider, model)."""

    code = "NO_ADAPTER"


class DuplicateAdapterError(ModelError):
    """A model name was registered twice."""

    code = "DUPLICATE_ADAPTER"


class ToolError(RetinueError):
    """Raised by a tool to produce an error result that carries a code."""


class StoreError(RetinueError):
    """A session store refused or failed an operation; ``code`` says why."""


class StoreTimeoutError(StoreError, TimeoutError):
    """A session's flush or detach ran past ``flush_timeout`` with the store's part
    unfinished; ``code`` says which (``FLUSH_TIMEOUT``, ``DETACH_TIMEOUT``). Also a
    ``TimeoutError``, so ``except TimeoutError`` catches it as any deadline that ran out."""


_T = TypeVar("_T")


def call_each(fn: Callable[[_T], object], items: Iterable[_T]) -> None:
    """Call *fn* on every item; the first failure is raised once all have run.

    For fan-outs where one failing receiver must not starve the others
    (session observers, synchronous listeners, logging drained messages).
    """
    failure: Exception | None = None
    for item in items:
        try:
            fn(item)
        except Exception as exc:
            if failure is None:
                failure = exc
    if failure is not None:
        raise failure


def leaf_error(error: BaseException) -> BaseException:
    """Unwrap exception groups that hold a single error (nurseries wrap every failure)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def describe_error(error: BaseException) -> str:
    """The message of *error*; its type name when the message is empty or cannot be read.

    Errors raised by plugins and tools are described with this, so an
    exception whose ``__str__`` raises still ends its turn or its tool call
    as an error instead of escaping the handler that reports it.
    """
    try:
        text = str(error)
    except Exception:
        return f"{type(error).__name__} (its message could not be read)"
    return text or type(error).__name__


def describe_failure(exc: BaseException) -> str:
    """The message of *exc*, led by its type name when the message alone says too little.

    Any lookup error's is (``KeyError('Paris')`` reads ``KeyError: 'Paris'``,
    its message only the missing key), and one that is only its argument's
    repr; a message that stands alone, ``disk is full``, is kept as it is.
    """
    message = describe_error(exc)
    name = type(exc).__name__
    if not message.startswith(name) and _names_only_a_value(exc, message):
        return f"{name}: {message}"
    return message


def _names_only_a_value(exc: BaseException, message: str) -> bool:
    """Whether *exc* is a lookup error, or *message* the bare repr of its one argument."""
    if isinstance(exc, LookupError):
        return True
    if len(exc.args) != 1:
        return False
    try:
        return message == repr(exc.args[0])
    except Exception:
        return False


STRAY_CANCEL_RULE = "a Cancelled caught inside must not be raised outside its own cancel scope"


def cancel_is_stray() -> bool:
    """Whether a ``trio.Cancelled`` raised now, in the current task, is stray.

    Stray: no cancel scope around the task is cancelled, so no cancel was
    delivered here; user code caught one inside a scope of its own and raised
    it again outside (:data:`STRAY_CANCEL_RULE`). Propagated, it would end the
    task's owner as if that had been cancelled.
    """
    # -inf exactly when a scope around this task is cancelled (trio's definition).
    return trio.current_effective_deadline() != -math.inf


_E = TypeVar("_E", bound=RetinueError)


def stray_cancel_error(
    culprit: str, kind: Callable[..., _E], cause: BaseException | None = None
) -> _E:
    """A stray ``Cancelled`` from *culprit* as its failure, of *kind* (``STRAY_CANCELLED``).

    Propagated, the Cancelled would end its owner as if that had been
    cancelled; as an error it ends only what *culprit*'s failure ends.
    *cause*, the Cancelled, is kept as the error's ``__cause__``.
    """
    error = kind(
        f"{culprit} raised trio.Cancelled while nothing around it was cancelled "
        f"({STRAY_CANCEL_RULE})",
        code="STRAY_CANCELLED",
    )
    error.__cause__ = cause
    return error


def failure_of(exc: BaseException, culprit: str, kind: Callable[..., RetinueError]) -> Exception:
    """What *culprit*'s raise of *exc* reports: an ``Exception`` as it is, a stray
    ``Cancelled`` (bare or in a group) as a *kind* error (:func:`stray_cancel_error`),
    any other ``BaseException`` that does not pass on as a *kind* error too
    (:func:`unknown_failure_error`).

    Raises:
        BaseException: what of *exc* passes on (:func:`pass_on`): a real cancel
            must reach its scope, and Ctrl-C the runtime.
    """
    if isinstance(exc, Exception):
        return exc
    try:
        pass_on(exc)
    except BaseException:
        # This frame is in the traceback of what passes on: holding *exc* (that, or
        # the group it came from), it would tie the two in a cycle.
        del exc
        raise
    if holds_cancel(exc):
        return stray_cancel_error(culprit, kind, exc)
    return unknown_failure_error(culprit, kind, exc)


def holds_cancel(exc: BaseException) -> bool:
    """Whether *exc* is a ``trio.Cancelled`` or a group holding one."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(trio.Cancelled) is not None
    return isinstance(exc, trio.Cancelled)


def only_cancels(exc: BaseException) -> bool:
    """Whether *exc* is a ``trio.Cancelled`` or a group holding nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return isinstance(exc, trio.Cancelled)


def is_interrupt(exc: BaseException) -> bool:
    """Whether *exc* is Ctrl-C, bare or in a group, whatever else the group holds."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(KeyboardInterrupt) is not None
    return isinstance(exc, KeyboardInterrupt)


def passes_on(exc: BaseException) -> bool:
    """Whether user code's raise of *exc*, in a trio task, passes on rather than being its failure.

    Ctrl-C does, and a real cancel, bare or in the group of a nursery the code
    opened. A stray cancel (:func:`cancel_is_stray`), bare or grouped, is the
    code's failure: passed on, it would end the task's owner as if that had
    been cancelled. So is anything else: a ``SystemExit`` (argparse in a
    plugin, say), a ``GeneratorExit`` or a ``BaseException`` subclass of the
    user's must not end the runtime with every agent in it (R7.45, R7.48).
    """
    return is_interrupt(exc) or (holds_cancel(exc) and not cancel_is_stray())


def pass_on(exc: BaseException) -> None:
    """Raise what of *exc* passes on (:func:`passes_on`); return if nothing does.

    Of a group, only the part that passes on is raised (its Ctrl-C, and its
    cancels when they are real), with *exc* as its context: the rest is the
    code's failure, which raised on would reach the runtime, or escape the
    scope the cancel is for and end its owner.
    """
    passing = _passing_part(exc)
    if passing is not None:
        try:
            raise passing
        finally:
            # This frame goes into the traceback of what it raises: its locals would
            # hold the exception that holds the frame, a cycle.
            del exc, passing


def _passing_part(exc: BaseException) -> BaseException | None:
    """What :func:`pass_on` raises of *exc*: itself, or of a group the part that passes on,
    caused by the group; ``None`` when nothing does."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc if passes_on(exc) else None
    passing: type[BaseException] | tuple[type[BaseException], ...] = KeyboardInterrupt
    if holds_cancel(exc) and not cancel_is_stray():
        passing = _PASSING_ON
    part, rest = exc.split(passing)
    if part is None:
        return None
    if rest is not None:
        # Kept only as the cause of what a cancel scope swallows: said here, or never.
        log.warning("a failure raised beside a cancel or Ctrl-C ends with it", exc_info=rest)
    part.__cause__ = exc  # as raise ... from exc: the group is its cause, not shown as context
    return part


# Of what user code (a listener, a tool body) raises, Ctrl-C and a real cancel pass on,
# as trio has them; a stray cancel is the code's own failure (passes_on).
_PASSING_ON = (KeyboardInterrupt, trio.Cancelled)

FAILURE_OF_TAKES = (Exception, trio.Cancelled, BaseExceptionGroup)
"""What :func:`failure_of` judges, for an ``except`` around code it reports the failure
of: a failure, a cancel, and a group of them (a nursery the code opened), of which it
raises again what passes on."""


def synchronous_failure_of(
    exc: BaseException, culprit: str, kind: Callable[..., RetinueError]
) -> Exception:
    """What a synchronous callback's raise of *exc* reports: an ``Exception`` as it is,
    a ``Cancelled`` (bare or grouped: none is delivered to synchronous code) as a
    *kind* error coded ``STRAY_CANCELLED``, any other ``BaseException`` as a *kind*
    error (:func:`unknown_failure_error`).

    Raises:
        BaseException: *exc* itself when it is Ctrl-C, bare or grouped.
    """
    if isinstance(exc, Exception):
        return exc
    if is_interrupt(exc):
        raise exc
    if holds_cancel(exc):
        return stray_cancel_error(culprit, kind, exc)
    return unknown_failure_error(culprit, kind, exc)


def synchronous_failure(exc: BaseException) -> bool:
    """Whether a synchronous callback's raise of *exc* is its own failure: all but Ctrl-C.

    No cancel is delivered to synchronous code, so a ``Cancelled``, bare or in
    a group, is the callback's own too.
    """
    return not is_interrupt(exc)


def error_code(error: BaseException) -> str | None:
    """An error's ``code`` attribute when it is a string (R7.45).

    A plugin's error whose ``code`` cannot be read has none: reading it must
    not fail the handler that records the error. A ``SystemExit``'s ``code``
    is the exit status it asks for, no error code.
    """
    if isinstance(error, SystemExit):
        return None
    try:
        code = getattr(error, "code", None)
    except Exception:
        return None
    return code if isinstance(code, str) else None


def unknown_failure_error(culprit: str, kind: Callable[..., _E], cause: BaseException) -> _E:
    """*culprit*'s raise of a ``BaseException`` that is no ``Exception`` and does not
    pass on, as a *kind* error: code ``UNKNOWN`` unless it carries one (R7.45).

    *cause* is kept as the error's ``__cause__``.
    """
    leaf = leaf_error(cause)
    error = kind(raised_message(culprit, leaf), code=error_code(leaf) or "UNKNOWN")
    error.__cause__ = cause
    return error


def raised_message(culprit: str, error: BaseException) -> str:
    """``"<culprit> raised <type>: <message>"``, the message left out when it is the type."""
    text = describe_error(error)
    what = type(error).__name__
    return f"{culprit} raised {what}" if text == what else f"{culprit} raised {what}: {text}"
