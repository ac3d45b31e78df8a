"""A session's observers: one notifier for all of them, their failures raised once all ran."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import trio

from retinue._errors import SessionError, stray_cancel_error

from ._events import Event

__all__ = ["Observer", "cancelled_observer", "no_observer", "notifier"]

Observer = Callable[[Event], None]


def _notify_all(observers: tuple[Observer, ...], event: Event) -> None:
    """Call every observer; the first failure is raised once all have run (R4.8, R4.10)."""
    # call_each's loop, written out: this runs for every event of an observed session.
    failure: Exception | None = None
    for observer in observers:
        try:
            observer(event)
        except Exception as exc:
            failure = failure or exc
        except trio.Cancelled as exc:
            failure = failure or cancelled_observer(observer, exc)
    if failure is not None:
        raise failure


def cancelled_observer(observer: object, cancelled: trio.Cancelled) -> SessionError:
    """An observer's ``Cancelled`` as its failure (observers are synchronous).

    No cancel is ever delivered to synchronous code, so the Cancelled is the
    observer's own; propagated, it would end the task that appended.
    """
    return stray_cancel_error(f"session observer {observer!r}", SessionError, cancelled)


def no_observer(_event: Event) -> None:
    """The notifier of a session nobody observes."""


def notifier(observers: tuple[Observer, ...]) -> Observer:
    """One callable that notifies *observers*: a lone observer is called directly."""
    if not observers:
        return no_observer
    if len(observers) == 1:
        return observers[0]
    return partial(_notify_all, observers)
