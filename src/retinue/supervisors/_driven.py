"""The sessions live agents drive, in every runtime of the process: one driver each (R12.7)."""

from __future__ import annotations

import weakref

from retinue._errors import SessionError
from retinue.session import Session

__all__ = ["mark_driven", "mark_undriven", "refuse_driven"]

# Process-wide, as a runtime's own checks cannot see another's agents: a second driver
# on a live log fails its turns, which the log refuses as opened inside the other's.
# Weak, as sessions go. A session leaves once its agent's teardown has detached it from
# its store; starting it again is then that store's business (or another's).
_DRIVEN: weakref.WeakSet[Session] = weakref.WeakSet()


def mark_driven(session: Session) -> None:
    """Record that an agent was published on *session*."""
    _DRIVEN.add(session)


def mark_undriven(session: Session) -> None:
    """Record that the agent driving *session* was torn down and its store let go of it."""
    _DRIVEN.discard(session)


def refuse_driven(session: Session) -> None:
    """Refuse *session* while an agent drives it, as ``SESSION_ALREADY_EXISTS``."""
    if session in _DRIVEN:
        raise SessionError(
            f"session {session.id!r} is driven by an agent (live, or not yet torn down) of "
            "this runtime or another, and a session has one driver: start_forked takes a "
            "session fresh from fork_agent_session, or one whose agent has been torn down",
            code="SESSION_ALREADY_EXISTS",
        )
