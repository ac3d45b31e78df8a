"""Write-behind records: what is buffered per session, flush requests, statistics."""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import final

import attrs
import trio

from retinue._errors import StoreError
from retinue.session import Event, Session, SessionHeader

from ._backend import AppendBatch
from ._repair import repair_tail

__all__ = [
    "Entry",
    "FirstClose",
    "LetGo",
    "Loaded",
    "Request",
    "StoreStatistics",
    "Tracked",
    "failed",
]


@final
@attrs.frozen
class StoreStatistics:
    """A snapshot of a store's write-behind state and commit counters."""

    tracked_sessions: int
    """Sessions currently attached (not those a failed detach released); none once closed."""
    buffered_events: int
    """Events appended but not yet committed, over all attached and released sessions;
    once closed, those the close could not write."""
    flush_requests: int
    """Flushes that had something to write (repairs on load too), counted once per session
    per commit: flushes of one session that a commit answers together count as one."""
    commits: int
    """Group commits performed (one transaction / one fsync each)."""
    committed_events: int
    """Events made durable so far."""
    largest_group: int
    """The most sessions committed by one group commit."""
    write_seconds: float
    """Time spent inside backend writes (encoding, I/O, fsync), summed over commits."""


@attrs.define(eq=False)
class Tracked:
    """An attached session: its write-behind buffer and stored position."""

    session: Session
    header: SessionHeader | None
    buffer: list[Event]
    cursor: int
    unsubscribe: Callable[[], None]
    released: bool = False
    """Let go by a detach that failed or was cancelled: no longer observed, its buffer
    kept for the next load of the id to take over."""

    def pending(self) -> tuple[Event, ...]:
        """The events to write from ``cursor`` on, in seq order, up to the last one heard.

        A session announces its events in seq order, so the buffer is in order
        and the sort, once per flush, takes one pass; it stays because a buffer
        written out of order would store a seq gap and the session would not
        load again (R4.5, R11.3). Events a commit took from the log before they
        were heard (see :meth:`logged`) are dropped here as stored already.
        """
        buffer = self.buffer
        buffer.sort(key=_seq_of)
        self._drop_stored()
        cursor = self.cursor
        if not buffer or buffer[-1].seq == cursor + len(buffer) - 1:
            return tuple(buffer)  # seqs are unique: sorted, these ends leave none missing
        return tuple(self.session.events[cursor : buffer[-1].seq + 1])

    def logged(self) -> tuple[Event, ...]:
        """The events to write from ``cursor`` on, up to the log's end, heard or not.

        An observer notified ahead of the store's may append and then flush a
        store that never blocks while the store has not heard the event being
        announced, nor the one just appended: both are in the log, appended
        before the flush was asked for, so the flush stores them. A released
        session is observed no more, and only what it buffered is its store's.
        """
        if self.released:
            return self.pending()
        # Those heard after an earlier commit took them from the log are stored: let go,
        # or a detach waiting for an empty buffer would wait for ever.
        self._drop_stored()
        return tuple(self.session.events[self.cursor :])

    def _drop_stored(self) -> None:
        """Let go of the buffered events before ``cursor``, the buffer being in seq order."""
        buffer = self.buffer
        if buffer and buffer[0].seq < self.cursor:
            del buffer[: bisect.bisect_left(buffer, self.cursor, key=_seq_of)]

    def unstored(self) -> int:
        """How many buffered events are not stored yet: one heard after a commit took it
        from the log (see :meth:`logged`) is stored, and left until the next flush."""
        cursor = self.cursor
        return sum(event.seq >= cursor for event in self.buffer)

    def stored_to(self, end: int) -> None:
        """Note that every event before seq *end* is stored: the cursor moves past them."""
        if end <= self.cursor:
            return
        buffer = self.buffer
        count = end - self.cursor
        if len(buffer) >= count and buffer[count - 1].seq == end - 1:
            del buffer[:count]  # the usual run: the buffer's head is exactly what was stored
        else:
            buffer[:] = [event for event in buffer if event.seq >= end]
        self.cursor = end

    def handed_over(self) -> Session:
        """A copy of the session as stored and buffered, an open final turn closed (R11.9).

        What a load of a released session returns: its buffered events are
        not stored yet, and the attach of the copy buffers them again.
        """
        events = [*self.session.events[: self.cursor], *self.pending()]
        return Session.from_events(
            self.session.header, [*events, *repair_tail(events)], chunks_checked=True
        )


_seq_of: Callable[[Event], int] = attrgetter("seq")


@final
@attrs.define(eq=False)
class FirstClose:
    """A store's first close: what it set out to drain, and how it ended."""

    draining: Sequence[Tracked] = ()
    """What it set out to drain: a load may stop tracking one of them meanwhile (its
    buffer dropped), and what it left is still lost."""
    done: trio.Event = attrs.Factory(trio.Event)
    """Set as it ends: a close called meanwhile waits for it."""
    failure: Exception | None = None
    """Why it did not complete, for a close that waited for it to raise."""
    cut: bool = False
    """Whether a cancel (or Ctrl-C) cut it short."""


@attrs.define(eq=False)
class Loaded:
    """A session a load returned, until it is attached or detached."""

    session: weakref.ref[Session]
    stored: int
    """How many of its events are stored (of a takeover, as it was loaded)."""
    released: Tracked | None = None
    """The released session it took over: its buffer and cursor carry over on attach."""


@attrs.frozen
class LetGo:
    """A session a failed or cancelled detach released."""

    events: int
    """How many events it held then, every one of them stored or buffered."""
    entry: weakref.ref[Tracked]
    """The tracking entry it left with its buffer, which a load's copy takes over."""
    refusal: StoreError | None = None
    """Why its create can never be written, if so (its id is stored): its buffer was dropped."""


@attrs.define(eq=False)
class Request:
    """One flush (or repair) waiting for the writer."""

    session_id: str
    prebuilt: AppendBatch | None = None
    done: trio.Event = attrs.field(factory=trio.Event)
    error: StoreError | None = None
    answered: bool = False
    queued: bool = False
    """Handed to the writer task, which will run it even if its submitter is cancelled."""
    returned: bool = False
    """Handed back unwritten by a writer that was cancelled: its submitter writes it."""


@attrs.define(eq=False)
class Entry:
    """One session's batch in a group commit, with the requests it answers."""

    batch: AppendBatch
    tracked: Tracked | None
    requests: list[Request]


def failed(batches: Sequence[AppendBatch], error: StoreError) -> list[StoreError | None]:
    """One error per batch of a group whose commit failed as a whole."""
    return [
        StoreError(
            f"session {batch.session_id!r}: the write failed: {error.message}", code=error.code
        )
        for batch in batches
    ]
