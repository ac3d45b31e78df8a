"""The error every log checker raises, naming the seq and the rule a log breaks."""

from __future__ import annotations

from retinue.session import Event

__all__ = ["InvariantError", "fail"]


class InvariantError(AssertionError):
    """A session log breaks a rule; the message names the seq and the rule id."""


def fail(event: Event | None, rule: str, message: str) -> InvariantError:
    """The error for *event* (``None``: the end of the log) breaking *rule*."""
    where = "end of log" if event is None else f"seq {event.seq} ({event.type})"
    return InvariantError(f"{where}: {rule}: {message}")
