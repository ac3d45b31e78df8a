"""Load-time checks and crash-tail repair of a stored log (R11.8-R11.10); pure but for a warning."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import final

import attrs

from retinue._errors import CorruptSessionError, InvalidJsonError, SessionError
from retinue.session import Event, Session, TurnEnd
from retinue.session._codec import decode_event

from ._backend import StoredLog
from ._common import check_version, written_whole
from ._repair import repair_tail

__all__ = ["Recovered", "recover"]

logger = logging.getLogger("retinue.stores")

HEADER = -1
"""The index :attr:`StoredLog.locate` names the header by."""


@final
@attrs.frozen
class Recovered:
    """A stored log after the R11.8 checks: what to keep, drop and append."""

    session: Session
    """The preserved events plus closers (or, with ``repair=False``, without them)."""
    kept: int
    """How many stored events are kept (the preserved region)."""
    dropped: int
    """How many stored records form the torn tail (a fragment counts as one)."""
    closers: tuple[Event, ...]
    """Synthetic events that close an open final turn (R11.9)."""

    @property
    def needs_write(self) -> bool:
        """Whether loading must truncate the tail or append closers durably."""
        return self.dropped > 0 or bool(self.closers)


def recover(
    log: StoredLog, session_id: str, *, repair: bool = True, writes_can_tear: bool
) -> Recovered:
    """Check and repair a stored log; raise ``CorruptSessionError`` naming the session.

    The committed region (up to the last complete ``turn/end``) must parse with
    contiguous seqs; after it, where *writes_can_tear*, the longest well-formed
    contiguous run is kept and the rest, from a line that does not parse as a
    JSON object on, is a torn tail to drop. A record written whole that this
    version cannot read, or that breaks the seq order, is refused wherever it
    lies; so is any record a backend whose writes cannot tear cannot read: it
    never holds a torn tail. An open final turn gets
    closers (R11.9) when *repair* is set; a repair that drops well-formed
    records logs a warning.
    """
    _check_header(log, session_id)
    events, bad, out_of_order = _decode_run(log, session_id)
    dropped = len(log.records) - len(events) + (1 if log.torn_fragment else 0)
    if bad is not None:
        if not writes_can_tear:
            raise _located(log, len(events), _damaged_commit(session_id, bad))
        if out_of_order:
            raise _located(log, len(events), _out_of_order(session_id, bad))
        following = _check_torn_tail(log, len(events), bad, session_id)
        if following and repair:
            _warn_dropped(session_id, len(events), dropped, following, bad)
    closers = tuple(repair_tail(events)) if repair else ()
    return Recovered(_replayed(log, events, closers, session_id), len(events), dropped, closers)


def _replayed(
    log: StoredLog, events: list[Event], closers: tuple[Event, ...], session_id: str
) -> Session:
    """The session of *events* and *closers*; a refusal names where its stored event lies."""
    taken = -1

    def each() -> Iterator[Event]:
        nonlocal taken
        # Each event is checked as it is taken, so the one refused is the last taken.
        for index, event in enumerate([*events, *closers]):
            taken = index
            yield event

    # A decoded line's chunk was checked as it was read; a store keeping events as objects
    # (memory) holds them as logged, a chunk logged unchecked (``append_chunk``) among them.
    checked = not any(isinstance(record, Event) for record in log.records)
    try:
        return Session.from_events(log.header, each(), chunks_checked=checked)
    except (SessionError, InvalidJsonError) as exc:
        broken = "breaks an invariant"
        if isinstance(exc, InvalidJsonError):
            broken = "holds a value that is not JSON"
        error = CorruptSessionError(
            f"session {session_id!r}: the stored log {broken}: {exc}", code="CORRUPT_SESSION"
        )
        # A closer is no stored record: it has no place to name.
        raise (_located(log, taken, error) if 0 <= taken < len(events) else error) from exc


def _check_header(log: StoredLog, session_id: str) -> None:
    header = log.header
    try:
        check_version(header, f"session {session_id!r}")
    except CorruptSessionError as exc:
        raise _located(log, HEADER, exc) from None
    if header.id != session_id:
        raise _located(
            log,
            HEADER,
            CorruptSessionError(
                f"session {session_id!r}: the stored header names session {header.id!r}",
                code="CORRUPT_SESSION",
            ),
        )


def _decode_run(log: StoredLog, session_id: str) -> tuple[list[Event], str | None, bool]:
    """Decode the longest well-formed seq-contiguous prefix; say what stopped it, and
    whether that was a record out of seq order (a seq gap) rather than one that is corrupt."""
    events: list[Event] = []
    for index in range(len(log.records)):
        event = _decode(log, index, session_id)
        if isinstance(event, str):
            return events, f"event {index} is corrupt ({event})", False
        if event.seq != index:
            return events, _out_of_seq(index, event.seq), True
        events.append(event)
    return events, None, False


def _out_of_seq(index: int, seq: int) -> str:
    """What a record of *seq* at event *index* is: a seq an earlier event holds, or a gap."""
    if 0 <= seq < index:
        return f"a seq stored twice (event {index} has seq {seq}, the seq of an earlier event)"
    return f"a seq gap (event {index} has seq {seq})"


def _out_of_order(session_id: str, bad: str) -> CorruptSessionError:
    """The refusal of a record read whole out of seq order, wherever it lies (R11.8).

    A torn write leaves a line that is no JSON object: the pages it lost read
    as nothing or as zeros, which join the lines around them into one. A whole
    record out of order was repeated or left out by another hand, and the
    records after it may be committed (a flush in the open turn commits them).
    """
    return CorruptSessionError(
        f"session {session_id!r}: {bad}: the record was written whole, so no torn write "
        "left it; nothing is dropped",
        code="CORRUPT_SESSION",
    )


def _damaged_commit(session_id: str, bad: str) -> CorruptSessionError:
    """The refusal of a bad record in a store that commits each write whole (R11.8).

    Such a store never holds part of a write: every stored record was committed,
    so its committed region is the whole log, and dropping the bad record, with the
    acknowledged records after it, as a torn tail would lose them.
    """
    return CorruptSessionError(
        f"session {session_id!r}: {bad} inside the committed region (the store commits "
        "each write whole, so every stored record is committed; nothing is dropped)",
        code="CORRUPT_SESSION",
    )


def _check_torn_tail(log: StoredLog, start: int, bad: str, session_id: str) -> int:
    """Raise unless the bad record at *start* lies past the committed region; count what follows.

    The committed region ends at the last complete ``turn/end`` (R11.8): a bad
    record before one is damage to acknowledged events. Past it, well-formed
    records may follow a bad one: a power loss can lose an unsynced append's
    first pages and keep later ones. They are dropped with it, but a record
    written whole that this version cannot read is refused (see :func:`_decode`).
    """
    following = 0
    for index in range(start, len(log.records)):
        event = _decode(log, index, session_id)
        if isinstance(event, str):
            continue
        if isinstance(event.data, TurnEnd):
            raise _located(
                log,
                start,
                CorruptSessionError(
                    f"session {session_id!r}: {bad} inside the committed region",
                    code="CORRUPT_SESSION",
                ),
            )
        following += index > start
    return following


def _warn_dropped(session_id: str, start: int, dropped: int, following: int, bad: str) -> None:
    """Say that well-formed records are discarded: more than a torn final record."""
    logger.warning(
        "session %r: %s; dropping the %d stored record(s) from event %d on, %d of them "
        "well-formed, none past the last complete turn/end",
        session_id,
        bad,
        dropped,
        start,
        following,
    )


def _located(log: StoredLog, index: int, error: CorruptSessionError) -> CorruptSessionError:
    """*error*, led by where record *index* is stored when the backend says (a file and line)."""
    if log.locate is None:
        return error
    return CorruptSessionError(f"{log.locate(index)}: {error.message}", code=error.code)


def _refused(
    log: StoredLog, index: int, error: CorruptSessionError, session_id: str
) -> CorruptSessionError:
    """*error*, the refusal of stored record *index*, led by where the record lies."""
    if log.locate is not None:
        return _located(log, index, error)
    # The record may name no seq, or another one: its place names it.
    problem = _unnamed(error, session_id)
    return CorruptSessionError(f"session {session_id!r}: event {index}: {problem}", code=error.code)


def _unnamed(error: CorruptSessionError, session_id: str) -> str:
    """What *error* says, less the session it names: a refusal naming it already leads."""
    return error.message.removeprefix(f"session {session_id!r}: ")


def _decode(log: StoredLog, index: int, session_id: str) -> Event | str:
    """Stored record *index*, or what is wrong with it if a torn write may have left it.

    Only a line that does not parse as a JSON object may be torn. A record
    written whole that this version cannot read (a key no field holds, a chunk
    of a newer kind, an integer longer than this process reads) is refused
    wherever it lies: dropped as a torn tail, it would be lost (R11.8).
    """
    record = log.records[index]
    if isinstance(record, Event):
        return record
    try:
        return decode_event(record, session_id=session_id)
    except CorruptSessionError as exc:
        if written_whole(record):
            raise _refused(log, index, exc, session_id) from exc.__cause__
        return _unnamed(exc, session_id)
