"""Relays a session's appends to the ``session/event`` hook while anyone listens."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import final

from retinue.hooks import HookBus
from retinue.session import Session

__all__ = ["EventRelay"]


@final
class EventRelay:
    """Relays a session's appends to ``session/event``, observing only while someone listens.

    The relay would otherwise cost a call on every append of every agent.
    """

    __slots__ = ("_agent_id", "_detach", "_hooks", "_relay", "_session")

    def __init__(self, hooks: HookBus, session: Session, agent_id: str) -> None:
        self._hooks = hooks
        self._session = session
        self._agent_id = agent_id
        # A partial, not a lambda: it runs on every append while attached.
        self._relay = partial(hooks.emit_raising, "session/event", session, scope=agent_id)
        self._detach: Callable[[], None] | None = None

    def toggle(self) -> None:
        """Observe the session while a ``session/event`` listener hears this agent, else stop."""
        if not self._hooks.hears("session/event", self._agent_id):
            self.detach()
        elif self._detach is None:
            self._detach = self._session.observe(self._relay)

    def detach(self) -> None:
        """Stop observing; idempotent."""
        detach, self._detach = self._detach, None
        if detach is not None:
            detach()
