"""A session's observers: one notifier for all of them, their failures raised once all ran."""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import final

from retinue._errors import (
    SessionError,
    synchronous_failure,
    synchronous_failure_of,
    unknown_failure_error,
)

from ._events import Event

__all__ = [
    "Announcer",
    "Observer",
    "check_observer",
    "no_observer",
    "notifier",
    "observer_failure",
]

Observer = Callable[[Event], None]

log = logging.getLogger("retinue.session")


def _notify_all(observers: tuple[Observer, ...], event: Event) -> None:
    """Call every observer; the first failure is raised once all have run (R4.8, R4.10).

    Ctrl-C is raised too once every observer heard the event, before any failure:
    an observer after the interrupted one may be the store that persists the log.
    """
    # call_each's loop, written out: this runs for every event of an observed session.
    failure: Exception | None = None
    interrupt: BaseException | None = None
    for observer in observers:
        try:
            observer(event)
        except BaseException as exc:
            if not synchronous_failure(exc):
                interrupt = interrupt or exc
            elif failure is None:
                failure = observer_failure(observer, exc)
            else:
                _log_unraised(event, observer_failure(observer, exc), "another observer's failure")
    if interrupt is not None:
        if failure is not None:
            _log_unraised(event, failure, "Ctrl-C")
        raise interrupt
    if failure is not None:
        raise failure


def _log_unraised(event: Event, failure: Exception, raised: str) -> None:
    """Log an observer's *failure* that the append does not raise: *raised* is raised instead."""
    log.error(
        "session observer failed on seq %s (%s); %s is raised instead",
        event.seq,
        event.type,
        raised,
        exc_info=failure,
    )


def observer_failure(observer: object, exc: BaseException) -> Exception:
    """What *observer*'s raise of *exc* fails the append with (R4.8, R7.45).

    An ``Exception`` is raised as it is. A ``Cancelled`` is the observer's own
    (no cancel is delivered to synchronous code; propagated, it would end the
    task that appended): a ``SessionError`` coded ``STRAY_CANCELLED``. A
    ``StopIteration`` (raised on, it would reach the appending coroutine and read
    "coroutine raised StopIteration") and any other ``BaseException`` that does
    not pass on (a ``SystemExit``, a subclass of the user's) are a
    ``SessionError`` coded ``UNKNOWN`` unless they carry a code. Each names the
    observer and keeps *exc* as its ``__cause__``.

    Raises:
        BaseException: *exc* itself when it is Ctrl-C, bare or grouped.
    """
    culprit = f"session observer {_shown(observer)}"
    if isinstance(exc, StopIteration):
        return unknown_failure_error(culprit, SessionError, exc)
    return synchronous_failure_of(exc, culprit, SessionError)


def _shown(observer: object) -> str:
    # Its repr is user code: failing here, it would hide the failure being reported.
    try:
        return repr(observer)
    except Exception:
        return f"<{type(observer).__qualname__} whose repr failed>"


def check_observer(observer: object) -> None:
    """Refuse an observer an append cannot call synchronously, before it registers.

    Registered, one that is not callable would fail every later append after
    logging its event, and an async one would leave its coroutine unawaited.

    Raises:
        TypeError: *observer* is not callable, or is an ``async def`` function
            (through partials) or an object whose ``__call__`` is one.
    """
    if not callable(observer):
        raise TypeError(f"session observers must be callable, got {observer!r}")
    function: object = observer
    while isinstance(function, partial):
        function = function.func
    if inspect.iscoroutinefunction(function) or _async_call(function):
        raise TypeError(f"session observers are called synchronously: {observer!r} is async")


def _async_call(function: object) -> bool:
    """Whether *function* is an object (no function or method) whose ``__call__`` is async."""
    return not inspect.isroutine(function) and inspect.iscoroutinefunction(type(function).__call__)


def no_observer(_event: Event) -> None:
    """The notifier of a session nobody observes."""


def notifier(observers: tuple[Observer, ...]) -> Observer:
    """One callable that notifies *observers*: a lone observer is called directly."""
    if not observers:
        return no_observer
    if len(observers) == 1:
        return observers[0]
    return partial(_notify_all, observers)


@final
class Announcer:
    """Notifies a session's observers of each appended event, in seq order (R4.8, R4.10).

    An observer that appends is told of its event after the one it is hearing,
    as is every observer after it: called at once, they would hear the newer
    event first, and a live transcript fed by them (R4.10) would run out of seq
    order. The deferred event is announced by the append being announced.
    """

    __slots__ = ("_announcing", "_deferred", "notify")

    def __init__(self) -> None:
        self.notify: Observer = no_observer
        # Each deferred event with the observers registered when it was appended:
        # they hear it, as they would have at once, not those registered since.
        self._deferred: deque[tuple[Event, Observer]] = deque()
        self._announcing = False

    def announce(self, event: Event) -> None:
        """Notify the observers of *event*, or of it later if an append is being announced.

        Raises:
            BaseException: once every observer heard every event appended while
                *event* was announced, Ctrl-C if one was raised, else the first
                failure (:func:`observer_failure`) with the observer's raise as cause.
        """
        notify = self.notify
        if self._announcing:
            self._deferred.append((event, notify))
            return
        self._announcing = True
        try:
            notify(event)
        except BaseException as exc:
            self._announce_deferred((event, notify, exc))
        else:
            if self._deferred:
                self._announce_deferred(None)
        finally:
            try:
                if self._deferred:
                    # Left by what escaped the loop (a Ctrl-C between two observers): heard
                    # now, as the store among them must hear each before a flush or detach.
                    self._announce_left()
            finally:
                self._announcing = False

    def _announce_deferred(self, failed: tuple[Event, Observer, BaseException] | None) -> None:
        """Announce the deferred events, then raise what the announcements failed with."""
        failure: tuple[Event, Exception, BaseException] | None = None
        interrupt: BaseException | None = None
        while True:
            if failed is not None:
                event, notify, exc = failed
                failed = None
                if not synchronous_failure(exc):
                    interrupt = interrupt or exc
                elif failure is None:
                    failure = (event, observer_failure(notify, exc), exc)
                else:
                    _log_unraised(event, observer_failure(notify, exc), "an earlier failure")
            if not self._deferred:
                break
            event, notify = self._deferred.popleft()
            try:
                notify(event)
            except BaseException as exc:
                failed = (event, notify, exc)
        if failure is None:
            if interrupt is not None:
                raise interrupt
            return
        failed_on, error, raised = failure
        if interrupt is not None:
            _log_unraised(failed_on, error, "Ctrl-C")
            raise interrupt
        if error is not raised:
            raise error from raised
        raise error

    def _announce_left(self) -> None:
        """Announce what is still deferred while an exception escapes; failures are logged,
        and a Ctrl-C among them is raised once every observer heard every event."""
        interrupt: BaseException | None = None
        while self._deferred:
            event, notify = self._deferred.popleft()
            try:
                notify(event)
            except BaseException as exc:
                if not synchronous_failure(exc):
                    interrupt = interrupt or exc
                else:
                    _log_unraised(event, observer_failure(notify, exc), "another exception")
        if interrupt is not None:
            raise interrupt
