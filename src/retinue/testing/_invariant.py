"""The error every log checker raises, naming the seq and the rule a log breaks, and the log it walks."""

from __future__ import annotations

from collections.abc import Iterable

from retinue._lossless import shown_short
from retinue.session import Event, Session

__all__ = ["InvariantError", "fail", "log_of"]


class InvariantError(AssertionError):
    """A session log breaks a rule; the message names the event's seq, the rule's id and what
    is wrong."""


def fail(event: Event | None, rule: str, message: str) -> InvariantError:
    """The error for *event* (``None``: the end of the log) breaking *rule*."""
    where = "end of log" if event is None else f"seq {event.seq} ({event.type})"
    return InvariantError(f"{where}: {rule}: {message}")


def log_of(events: object, checker: str) -> tuple[Event, ...]:
    """*events* as the log *checker* walks: every event, taken once.

    A checker walks its log more than once: an iterator given as it is would
    be used up by the first walk, and the others would pass on no events.

    Raises:
        TypeError: *events* is a session rather than its events, is not
            iterable, or holds something other than an ``Event``.
    """
    if isinstance(events, Session):
        raise TypeError(f"{checker} takes a log, not a session: pass session.events")
    if not isinstance(events, Iterable) or isinstance(events, str | bytes):
        raise TypeError(f"{checker} takes a sequence of Events, got {shown_short(events)}")
    log = tuple(events)
    for index, event in enumerate(log):
        if not isinstance(event, Event):
            raise TypeError(
                f"{checker} takes a sequence of Events; item {index} is a "
                f"{type(event).__name__} ({shown_short(event)})"
            )
    return log
