"""A session's observers: one notifier for all of them, their failures raised once all ran."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import final

from retinue._callables import check_callable
from retinue._errors import (
    SessionError,
    synchronous_failure,
    synchronous_failure_of,
    unknown_failure_error,
)
from retinue._naming import qualified_name

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
    failures: _Failures | None = None
    for observer in observers:
        try:
            observer(event)
        except BaseException as exc:
            failures = failures or _Failures()
            failures.note(event, observer, exc)
    if failures is not None:
        failures.raise_any()


@final
class _Failures:
    """What observers raised while events were announced: the first failure, which is
    raised, and the first Ctrl-C, which is raised instead of it; the others are logged."""

    __slots__ = ("_failure", "_interrupt")

    def __init__(self) -> None:
        # The event, the failure the append raises (observer_failure) and the raise it is of.
        self._failure: tuple[Event, Exception, BaseException] | None = None
        self._interrupt: BaseException | None = None

    def note(
        self, event: Event, observer: object, exc: BaseException, *, raised: str | None = None
    ) -> None:
        """Note *observer*'s raise of *exc* on *event*; with *raised* (what is raised instead,
        an exception already on its way) a failure is only logged."""
        if not synchronous_failure(exc):
            self._interrupt = self._interrupt or exc
        elif raised is None and self._failure is None:
            self._failure = (event, observer_failure(observer, exc), exc)
        else:
            failure = observer_failure(observer, exc)
            _log_unraised(event, failure, raised or "another observer's failure")

    def raise_any(self) -> None:
        """Raise the first Ctrl-C (the failure logged), else the first failure, if any."""
        failure = self._failure
        if self._interrupt is not None:
            if failure is not None:
                _log_unraised(failure[0], failure[1], "Ctrl-C")
            raise self._interrupt
        if failure is None:
            return
        _event, error, raised = failure
        if error is not raised:
            raise error from raised
        raise error


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
    # By its code, not its repr: the message is stored in the turn's end, and a bound
    # method's repr shows its object, which may hold a credential.
    culprit = f"session observer {qualified_name(observer)}"
    if isinstance(exc, StopIteration):
        return unknown_failure_error(culprit, SessionError, exc)
    return synchronous_failure_of(exc, culprit, SessionError)


def check_observer(observer: object) -> None:
    """Refuse an observer an append cannot call synchronously, before it registers.

    Registered, one that is not callable would fail every later append after
    logging its event, an async one would leave its coroutine unawaited, and a
    generator function's body would never run.

    Raises:
        TypeError: *observer* is not callable, or is an ``async def`` or generator
            function (through partials) or an object whose ``__call__`` is one.
    """
    check_callable(observer, "session observers", synchronous=True)


_BUILTIN_METHOD: type = type([].append)


def _list_append(observer: Observer) -> bool:
    """Whether *observer* is the ``append`` of a list (not of a subclass, which may override it).

    Its type is tested first: a wrapper that passes its attributes and ``==`` on to a
    list's append has code of its own, which may append or raise as any observer may.
    """
    if type(observer) is not _BUILTIN_METHOD:
        return False
    owner = observer.__self__  # type: ignore[attr-defined]
    return type(owner) is list and observer == owner.append


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

    __slots__ = ("_announcing", "_deferred", "_plain", "direct", "notify")

    def __init__(self) -> None:
        self.notify: Observer = no_observer
        # The lone observer when it is a list's append (a store's buffer), which can
        # neither append to the session nor raise: it needs no announcement, and
        # appends call it as ``direct``, saving a call on every append, except while
        # an append is being announced (the observers changed during it).
        self._plain: Observer | None = None
        self.direct: Observer | None = None
        # Each deferred event with the observers registered when it was appended:
        # they hear it, as they would have at once, not those registered since.
        self._deferred: deque[tuple[Event, Observer]] = deque()
        self._announcing = False

    def observers(self, observers: tuple[Observer, ...]) -> None:
        """Announce to *observers* from now on, in their order."""
        self.notify = notifier(observers)
        lone = observers[0] if len(observers) == 1 else None
        self._plain = lone if lone is not None and _list_append(lone) else None
        self.direct = None if self._announcing else self._plain

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
            failures = _Failures()
            failures.note(event, notify, exc)
            self._announce_deferred(failures)
        else:
            if self._deferred:
                self._announce_deferred(_Failures())
        finally:
            try:
                if self._deferred:
                    # Left by what escaped the loop (a Ctrl-C between two observers): heard
                    # now, as the store among them must hear each before a flush or detach.
                    self._announce_left()
            finally:
                self._announcing = False
                self.direct = self._plain

    def _announce_deferred(self, failures: _Failures) -> None:
        """Announce the deferred events, then raise what the announcements failed with."""
        while self._deferred:
            event, notify = self._deferred.popleft()
            try:
                notify(event)
            except BaseException as exc:
                failures.note(event, notify, exc)
        failures.raise_any()

    def _announce_left(self) -> None:
        """Announce what is still deferred while an exception escapes; failures are logged,
        and a Ctrl-C among them is raised once every observer heard every event."""
        failures = _Failures()
        while self._deferred:
            event, notify = self._deferred.popleft()
            try:
                notify(event)
            except BaseException as exc:
                failures.note(event, notify, exc, raised="another exception")
        failures.raise_any()
