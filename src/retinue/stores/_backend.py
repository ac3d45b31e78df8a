"""The storage seam under the write-behind coordinator: small, synchronous backends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, final

import attrs

from retinue._errors import StoreError
from retinue.session import Event, SessionHeader

__all__ = ["AppendBatch", "Listing", "SkippedSession", "StorageBackend", "StoredLog"]


@final
@attrs.frozen
class AppendBatch:
    """Events of one session to commit together with the rest of a group."""

    session_id: str
    """The session the events belong to."""
    first_seq: int
    """The seq the stored log must end before (its next seq); ``events[0].seq`` if any."""
    events: tuple[Event, ...]
    """Contiguous events starting at ``first_seq``."""
    header: SessionHeader | None = None
    """Set for a session that is not stored yet: header and events are written atomically."""
    truncate_to: int | None = None
    """Repair only: drop stored events with ``seq >= truncate_to`` first (a torn tail)."""


@final
@attrs.frozen
class StoredLog:
    """What a backend holds for one session, undecoded, in storage order."""

    header: SessionHeader
    """The parsed header (a corrupt header raises ``CorruptSessionError`` instead)."""
    records: Sequence[str | bytes | Event]
    """One item per stored event: its canonical JSON line, or the event itself (memory)."""
    torn_fragment: bool = False
    """Whether an incomplete fragment follows the records (a torn final write)."""
    locate: Callable[[int], str] | None = attrs.field(default=None, eq=False)
    """Where record *index* (the header: -1) is stored, to name it in an error (a JSONL
    file and line)."""


@final
@attrs.frozen
class SkippedSession:
    """A stored session a listing leaves out: its header cannot be read, names another id
    or holds a format version this build does not read."""

    stored_as: str
    """Where it is stored: the id it is stored under, or its file (JSONL)."""
    problem: str
    """What is wrong with it, in one line that names it."""


@final
@attrs.frozen
class Listing:
    """The headers of the stored sessions, and the stored sessions left out of them."""

    headers: tuple[SessionHeader, ...]
    """One per listable session, in no particular order."""
    skipped: tuple[SkippedSession, ...] = ()
    """Stored sessions whose header could not be listed, each with why."""


class StorageBackend(Protocol):
    """Synchronous storage under a :class:`BufferedStore`.

    When ``blocking`` is true every method runs in a worker thread, never on
    the event loop, and the coordinator never calls ``write`` concurrently with
    itself. ``write`` commits a whole group in one transaction (one fsync) and
    reports each batch's own refusal without failing the others; an exception
    means nothing of the group is committed.
    """

    @property
    def blocking(self) -> bool:
        """Whether calls do I/O and must run in a worker thread."""
        ...

    @property
    def durable(self) -> bool:
        """Whether stored sessions outlive the process (memory is the one that does not).

        A backend that is not durable must not be ``blocking``.
        """
        ...

    @property
    def writes_can_tear(self) -> bool:
        """Whether a crash can leave a write partly stored: a torn tail for a load to repair.

        True only where appends land in storage piece by piece (files). A store
        that commits each write in a transaction never holds part of one, so a
        record it cannot read is damage to committed events, refused on load (R11.8).
        """
        ...

    def open(self) -> None:
        """Create or check the storage (schema, directories); idempotent."""
        ...

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        """Commit *batches* durably; one result per batch (``None`` = committed)."""
        ...

    def read(self, session_id: str) -> StoredLog | None:
        """Return the stored log of *session_id*, or ``None`` if it is not stored."""
        ...

    def listing(self) -> Listing:
        """Headers of every stored session, reading no events; unreadable ones are skipped.

        A session is skipped, with its problem, when its header cannot be read
        or parsed, names an id other than the one it is stored under, or holds
        a format version this build does not read.
        """
        ...

    def contains(self, session_id: str) -> bool:
        """Whether *session_id* is stored."""
        ...

    def claim(self, session_id: str) -> None:
        """Become the only writer of *session_id*; raise ``StoreError(SESSION_LOCKED)`` if taken."""
        ...

    def release(self, session_id: str) -> None:
        """Give up the claim on *session_id* (no-op if not held)."""
        ...

    def close(self) -> None:
        """Release every resource; idempotent."""
        ...
