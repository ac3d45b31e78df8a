"""The in-memory store: the default when no durable store is configured."""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

from retinue._errors import StoreError
from retinue.session import Event, SessionHeader

from ._backend import AppendBatch, Listing, StoredLog
from ._common import already_exists, check_version, listing_of, seq_conflict
from ._writebehind import BufferedStore

__all__ = ["MemoryBackend", "MemoryStore"]


@final
class MemoryBackend:
    """Events kept as objects in process memory; commits are instant and never block."""

    blocking = False
    durable = False
    writes_can_tear = False
    """Events are kept as objects, never as records a crash could cut short."""

    def __init__(self) -> None:
        self._logs: dict[str, tuple[SessionHeader, list[Event]]] = {}

    def open(self) -> None:
        """Nothing to create."""

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        """Append each batch after the same checks a durable backend makes."""
        return [self._write_one(batch) for batch in batches]

    def _write_one(self, batch: AppendBatch) -> StoreError | None:
        stored = self._logs.get(batch.session_id)
        if batch.header is not None:
            if stored is not None:
                return already_exists(batch.session_id)
            self._logs[batch.session_id] = (batch.header, list(batch.events))
            return None
        if stored is None:
            return StoreError(
                f"session {batch.session_id!r} is not stored", code="SESSION_NOT_FOUND"
            )
        events = stored[1]
        if batch.truncate_to is not None:
            del events[batch.truncate_to :]
        if len(events) != batch.first_seq:
            return seq_conflict(batch.session_id, len(events), batch.first_seq)
        events.extend(batch.events)
        return None

    def read(self, session_id: str) -> StoredLog | None:
        """The stored events as objects."""
        stored = self._logs.get(session_id)
        return None if stored is None else StoredLog(stored[0], tuple(stored[1]))

    def listing(self) -> Listing:
        """Every stored header, written by this process; one in another format version
        (a session built so) is skipped, as a load refuses it."""
        stored = ((session_id, header) for session_id, (header, _) in self._logs.items())
        return listing_of(stored, _readable)

    def contains(self, session_id: str) -> bool:
        """Whether the session is stored."""
        return session_id in self._logs

    def delete(self, session_id: str) -> None:
        """Forget the session's header and events; ``SESSION_NOT_FOUND`` if it is not stored."""
        if self._logs.pop(session_id, None) is None:
            raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")

    def claim(self, session_id: str) -> None:
        """One process, one store: attachment already excludes a second writer."""

    def release(self, session_id: str) -> None:
        """Nothing to release."""

    def close(self) -> None:
        """Keep the logs: a closed memory store is still readable by nobody."""


@final
class MemoryStore(BufferedStore):
    """Keeps flushed events in process memory: survives agent disposal, not its closing.

    A runtime closes the store it is given when it exits; hold it open with
    ``async with store:`` around the runtimes that share it.

    Use it as ``async with MemoryStore() as store:`` (group commit) or plainly.
    """

    def __init__(self) -> None:
        super().__init__(MemoryBackend(), name="MemoryStore")


def _readable(header: SessionHeader, session_id: str) -> SessionHeader:
    """*header*, unless it is in a format version a load refuses."""
    check_version(header, f"session {session_id!r}")
    return header
