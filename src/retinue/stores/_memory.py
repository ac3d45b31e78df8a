"""The in-memory store: the default when no durable store is configured."""

from __future__ import annotations

from typing import final

import attrs
import trio

from .._errors import StoreError
from ..session import Event, Session, SessionHeader
from ._repair import repair_tail

__all__ = ["MemoryStore"]


@final
@attrs.define(eq=False)
class MemoryStore:
    """Keeps every flushed event in process memory; survives agent disposal, not the process."""

    _stored: dict[str, tuple[SessionHeader, list[Event]]] = attrs.field(factory=dict, init=False)
    _buffers: dict[str, list[Event]] = attrs.field(factory=dict, init=False)
    _headers: dict[str, SessionHeader] = attrs.field(factory=dict, init=False)
    _unsubscribe: dict[str, object] = attrs.field(factory=dict, init=False)

    def attach(self, session: Session) -> None:
        """Start buffering *session*'s appends; never blocks."""
        self._track(session)

    def attach_new(self, session: Session) -> None:
        """Buffer a session that is not stored yet, including its seed events."""
        self._track(session)
        self._buffers[session.id].extend(session.events)

    def _track(self, session: Session) -> None:
        if session.id in self._buffers:
            raise StoreError(f"session {session.id!r} is already attached", code="SESSION_TRACKED")
        buffer: list[Event] = []
        self._buffers[session.id] = buffer
        self._headers[session.id] = session.header
        self._unsubscribe[session.id] = session.observe(buffer.append)

    async def flush(self, session: Session) -> None:
        """Move buffered events to the stored log."""
        await trio.lowlevel.checkpoint()
        buffer = self._buffers.get(session.id)
        if not buffer:
            return
        header, stored = self._stored.setdefault(session.id, (self._headers[session.id], []))
        if buffer[0].seq != len(stored):
            raise StoreError(
                f"session {session.id!r}: append at seq {buffer[0].seq}, stored {len(stored)}",
                code="SEQ_MISMATCH",
            )
        stored.extend(buffer)
        buffer.clear()

    async def detach(self, session: Session) -> None:
        """Flush and stop tracking *session*."""
        await self.flush(session)
        unsubscribe = self._unsubscribe.pop(session.id, None)
        if callable(unsubscribe):
            unsubscribe()
        self._buffers.pop(session.id, None)
        self._headers.pop(session.id, None)

    async def load(self, session_id: str) -> Session:
        """Return a fresh session over the stored log (repaired if it ends mid-turn)."""
        await trio.lowlevel.checkpoint()
        stored = self._stored.get(session_id)
        if stored is None:
            raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
        header, events = stored
        closers = repair_tail(events)
        events.extend(closers)
        return Session.from_events(header, events)

    async def list(self) -> list[SessionHeader]:
        """Headers of every stored session."""
        await trio.lowlevel.checkpoint()
        return [header for header, events in self._stored.values() if events]

    async def exists(self, session_id: str) -> bool:
        """Whether *session_id* has stored events."""
        await trio.lowlevel.checkpoint()
        return session_id in self._stored

    async def aclose(self) -> None:
        """Nothing to release."""
        await trio.lowlevel.checkpoint()
