"""How the bus calls one listener, and how errors name it and what it did."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import NoReturn

from retinue._errors import HookError, failure_of, raised_message

from ._seams import Listener, qualified_name

__all__ = [
    "a_listener_of",
    "call",
    "culprit_failure",
    "listener_label",
    "log_unraised",
    "note_culprit",
    "qualified_name",
    "raise_failure",
    "refuse_coroutine",
    "stop_iteration_failure",
]

log = logging.getLogger("retinue.hooks")


async def call(name: str, fn: Listener, *args: object) -> object:
    """Call *fn* with *args*, awaiting what it returns if that is awaitable.

    Raises:
        RuntimeError: *fn* raised ``StopIteration`` (:func:`stop_iteration_failure`).
        HookError: *fn* raised a ``BaseException`` that does not pass on (a stray
            cancel, a ``SystemExit``), caused by it.
    """
    try:
        result = fn(*args)
        if inspect.isawaitable(result):
            return await result
    except BaseException as exc:
        raise_failure(listener_label(name, fn), exc)
    return result  # noqa: ASYNC910 - a synchronous listener; dispatch on the hot path adds no scheduling point


def raise_failure(culprit: str, exc: BaseException, *, passed_on: bool = False) -> NoReturn:
    """Raise what *culprit*'s raise of *exc* propagates as (:func:`culprit_failure`): *exc*
    again, or its failure from the failure's own cause; called where *exc* is handled.

    What is raised gains a note naming *culprit* (the failure a ``StopIteration`` or a
    stray cancel becomes too), unless *culprit* *passed_on* one the rest of its chain
    raised (from a waterfall's ``next()``).
    """
    failure = culprit_failure(culprit, exc)
    if not passed_on and isinstance(failure, Exception):
        note_culprit(failure, f"raised by {culprit}")
    if failure is exc:
        raise exc
    raise failure from failure.__cause__


def note_culprit(exc: Exception, note: str) -> None:
    """Add *note*, naming what raised *exc*, unless *exc* already has it.

    Once: a listener raising one exception object on every dispatch would otherwise
    gain a note per dispatch, without bound. An exception whose notes are no list
    (or cannot be read) is raised as it is: the ``TypeError`` of adding to them
    would escape the dispatch in its place.
    """
    try:
        if note not in getattr(exc, "__notes__", ()):
            exc.add_note(note)
    except Exception:
        # The notes are the listener's: its failure, not theirs, is what the dispatch raises.
        return


def culprit_failure(culprit: str, exc: BaseException) -> BaseException:
    """What a raise of *exc* by *culprit* (a listener or a tool guard, as errors name it)
    propagates as: an ``Exception`` as it is, a ``StopIteration`` as
    :func:`stop_iteration_failure`, any other ``BaseException`` that does not pass on (a
    stray cancel, a ``SystemExit``) as a ``HookError``, which the seam's caller contains.

    Raises:
        BaseException: Ctrl-C or a real cancel, raised again as they are.
    """
    stop = _stop_iteration(exc)
    if stop is not None:
        return stop_iteration_failure(culprit, stop)
    if isinstance(exc, Exception):
        return exc
    return failure_of(exc, culprit, HookError)


def _stop_iteration(exc: BaseException) -> StopIteration | None:
    """The ``StopIteration`` *exc* is, or that an async function raised to make it."""
    if isinstance(exc, StopIteration):
        return exc
    cause = exc.__cause__
    if (
        type(exc) is RuntimeError
        and isinstance(cause, StopIteration)
        and str(exc) == _PEP_479
        and _left(cause, exc)
    ):
        return cause
    return None


# Python's text for a StopIteration leaving a coroutine; a listener's own RuntimeError
# caused by one of a helper's (of another text) is no such.
_PEP_479 = "coroutine raised StopIteration"


def _left(stop: StopIteration, exc: BaseException) -> bool:
    """Whether *stop* left a coroutine, which PEP 479 made *exc* of.

    Its first frame is then a coroutine's that had ended when *exc* was raised, so
    *exc* never went through it, as one raised in the coroutine from *stop* does.
    """
    first = stop.__traceback__
    if first is None or not first.tb_frame.f_code.co_flags & inspect.CO_COROUTINE:
        return False
    through = exc.__traceback__
    while through is not None:
        if through.tb_frame is first.tb_frame:
            return False
        through = through.tb_next
    return True


def stop_iteration_failure(culprit: str, exc: StopIteration) -> RuntimeError:
    """*culprit*'s ``StopIteration`` as its failure, naming it.

    Raised on through a coroutine it would read "coroutine raised StopIteration"
    (PEP 479), naming a coroutine a sync listener or guard does not have, and no
    async one. *exc* is its cause, wherever it is raised: its traceback holds the
    culprit's line.
    """
    error = RuntimeError(raised_message(culprit, exc))
    error.__cause__ = exc
    return error


def a_listener_of(name: str) -> str:
    """How errors name a listener of *name*: "an agent/request listener", "a tools/result listener"."""
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name} listener"


def listener_label(name: str, fn: Listener) -> str:
    """A listener as the errors of what it did name it: "a tools/pre-execute listener (app.check)"."""
    return f"{a_listener_of(name)} ({qualified_name(fn)})"


def refuse_coroutine(
    name: str, fn: Callable[..., object], result: object, role: str = "listeners"
) -> None:
    """Refuse what *fn*, an emit listener (or a watcher), returned if it is a coroutine it never ran.

    Named: *fn* returned, so no traceback of the error shows its line.
    """
    if inspect.iscoroutine(result):
        result.close()
        raise TypeError(
            f"{name} {role} must be synchronous: {qualified_name(fn)} returned a coroutine"
        )


def log_unraised(name: str, failures: list[Exception], why: str) -> None:
    """Log the listener failures a dispatch does not raise: one exception propagates."""
    for exc in failures:
        log.error("listener failed in %s (not raised: %s)", name, why, exc_info=exc)
