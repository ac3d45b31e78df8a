"""Helpers shared by the storage backends: header and segment checks, lock files, typed refusals."""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
import sys
from collections.abc import Callable, Iterable
from typing import AnyStr, TypeVar

import trio

from retinue._checks import unnamable_path
from retinue._errors import ConfigError, CorruptSessionError, StoreError
from retinue.session import FORMAT_VERSION, SessionHeader, load_header
from retinue.session._codec import LongIntError, loads_line

from ._backend import Listing, SkippedSession

T = TypeVar("T")

__all__ = [
    "WaitedOutError",
    "already_exists",
    "cannot_open",
    "check_cancelled",
    "check_next_seq",
    "check_version",
    "claim_new_id",
    "held_elsewhere",
    "listed_header",
    "listing_of",
    "lock_file",
    "parse_header",
    "parse_headers",
    "refuse_unnamable",
    "segment_records",
    "seq_conflict",
    "storage_failed",
    "stored_int",
    "written_whole",
]


class WaitedOutError(StoreError):
    """An open that waited out its whole timeout: for another connection's lock, or for a
    server that did not answer within the connect timeout.

    Tried again at once, it would wait as long to fail alike: a close that waited for
    it to drain through fails with it instead, where it opens again after any other
    failure (a server restarting), which may be gone by then."""


def refuse_unnamable(path: str | os.PathLike[str], *, what: str) -> None:
    """Refuse a store's *path* no file can have; *what* names it (``"SQLiteStore path"``).

    A NUL character, or a character the file system's encoding cannot write (a
    lone surrogate that no bytes decoded with ``surrogateescape`` gave): the
    OS layer refuses either with a bare ``ValueError`` ("embedded null byte")
    or ``UnicodeEncodeError`` that names no store, and only once it is opened.

    Raises:
        ConfigError: ``INVALID_STORE_PATH``, naming *what*, the path and the character.
    """
    text = os.fsdecode(path)
    problem = unnamable_path(text)
    if problem is not None:
        raise ConfigError(f"{what} {text!r} {problem}", code="INVALID_STORE_PATH")


def check_cancelled() -> None:
    """Raise ``trio.Cancelled`` if the trio task waiting for this worker thread was cancelled.

    A thread trio did not start (a backend used directly) is never cancelled."""
    try:
        trio.from_thread.check_cancelled()
    except RuntimeError:
        return


def parse_header(text: str | bytes, session_id: str, *, at: str | None = None) -> SessionHeader:
    """Parse a stored header line; raise ``CorruptSessionError`` naming the session.

    *at* names where the line was read instead (a file and its line number).
    """
    where = f"session {session_id!r}" if at is None else at
    if not text.strip():
        # A crash before the first write leaves an empty file: say so, not "Expecting value".
        raise CorruptSessionError(f"{where}: the header is empty", code="CORRUPT_HEADER")
    try:
        raw = loads_line(text)
    except LongIntError as exc:
        raise CorruptSessionError(
            f"{where}: session header is malformed: {exc}", code="CORRUPT_HEADER"
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptSessionError(
            f"{where}: the header is not valid UTF-8 JSON: {exc}", code="CORRUPT_HEADER"
        ) from exc
    except RecursionError:
        raise CorruptSessionError(
            f"{where}: the header is nested too deeply to load", code="CORRUPT_HEADER"
        ) from None
    if not isinstance(raw, dict) or raw.get("type") != "session":
        raise CorruptSessionError(
            f"{where}: the header is not a session header line", code="CORRUPT_HEADER"
        )
    try:
        return load_header(raw)
    except CorruptSessionError as exc:
        raise CorruptSessionError(f"{where}: {exc.message}", code="CORRUPT_HEADER") from exc


def written_whole(line: str | bytes) -> bool:
    """Whether a stored event *line* was written whole: it parses as one JSON object.

    A crash or a write under way cuts a line short, and no part of a JSON
    object short of its end is one; a power loss that keeps an append's later
    pages leaves no line starting one. A line that parses whole is a record
    (one this version may still refuse), never a torn write to discard (R11.8).
    """
    try:
        return isinstance(loads_line(line), dict)
    except LongIntError as exc:
        return isinstance(exc.parsed, dict)  # whole, with an integer longer than this process reads
    except (ValueError, RecursionError):
        return False


def check_version(header: SessionHeader, where: str) -> None:
    """Refuse a log written in a format version this build does not read (R11.10).

    Raises:
        CorruptSessionError: ``UNSUPPORTED_VERSION``, naming *where*.
    """
    if header.version != FORMAT_VERSION:
        raise CorruptSessionError(
            f"{where}: format version {header.version} is not the supported "
            f"version {FORMAT_VERSION}",
            code="UNSUPPORTED_VERSION",
        )


def listing_of(
    entries: Iterable[tuple[str, T]], header_of: Callable[[T, str], SessionHeader]
) -> Listing:
    """The headers *header_of* makes of ``(id, stored header)`` entries; each it refuses
    (``CorruptSessionError``) is skipped with its problem, so listing goes on."""
    headers: list[SessionHeader] = []
    skipped: list[SkippedSession] = []
    for session_id, stored in entries:
        try:
            headers.append(header_of(stored, session_id))
        except CorruptSessionError as exc:
            skipped.append(SkippedSession(session_id, exc.message))
    return Listing(tuple(headers), tuple(skipped))


def parse_headers(rows: Iterable[tuple[str, str | bytes, object]], column: str) -> Listing:
    """Parse ``(id, header, next_seq)`` rows, *column* naming ``next_seq``; each corrupt one
    is skipped with its problem, so listing goes on."""

    def header_of(row: tuple[str | bytes, object], key: str) -> SessionHeader:
        header, next_seq = row
        check_next_seq(stored_int(next_seq, key, column), key, column)
        return listed_header(header, key)

    return listing_of(((key, (header, stored)) for key, header, stored in rows), header_of)


def check_next_seq(next_seq: int, session_id: str, column: str) -> None:
    """Refuse a stored *next_seq* (read from *column*) below 1.

    A session is stored with its first events, header and all in one commit,
    so no commit leaves a row saying it holds none: such a row is damaged, and
    whatever segments it has are not where it says.

    Raises:
        CorruptSessionError: naming the session, the column and the value.
    """
    if next_seq < 1:
        raise CorruptSessionError(
            f"session {session_id!r}: {column} holds {next_seq}, yet a session is stored "
            "with its first event: the row is damaged",
            code="CORRUPT_SESSION",
        )


def listed_header(
    text: str | bytes, key: str, key_of: Callable[[str], str] = lambda session_id: session_id
) -> SessionHeader:
    """Parse the header stored under *key*, which must be ``key_of(header.id)``.

    A header naming another id, or written in a format version this build
    does not read, could not be loaded by the id a listing would show (a
    load refuses it), so it is refused here too.

    Raises:
        CorruptSessionError: the header is corrupt, names another session or
            holds another format version; naming *key*.
    """
    header = parse_header(text, key)
    check_version(header, f"session {key!r}")
    if key_of(header.id) != key:
        raise CorruptSessionError(
            f"session {key!r}: the stored header names session {header.id!r}",
            code="CORRUPT_HEADER",
        )
    return header


def segment_records(
    session_id: str, segments: Iterable[tuple[int, int, AnyStr]], next_seq: int, newline: AnyStr
) -> list[AnyStr]:
    """The event lines of ``(first_seq, count, body)`` rows, in seq order.

    Raises ``CorruptSessionError`` unless they hold seqs 0..next_seq exactly
    (*newline* joins a body's lines). A commit writes a segment and
    ``next_seq`` together, so a segment missing or cut short is lost data,
    never a torn write to repair: the later segments are acknowledged events.
    """
    records: list[AnyStr] = []
    for first, count, body in segments:
        if first != len(records):
            raise _seq_gap(session_id, len(records), first)
        lines = body.split(newline)
        if len(lines) != count:
            raise CorruptSessionError(
                f"session {session_id!r}: a seq gap: the segment from seq {first} holds "
                f"{len(lines)} event records, not {count}"
            )
        records.extend(lines)
    if len(records) != next_seq:
        raise _seq_gap(session_id, len(records), next_seq)
    return records


def stored_int(value: object, session_id: str, column: str) -> int:
    """*value*, read from *column* of *session_id*'s rows, if it is an integer.

    SQLite keeps whatever a column is given (text, a real, a blob), so a
    value its schema calls an integer may be anything; a bool is no count.

    Raises:
        CorruptSessionError: naming the session, the column and the value.
    """
    if type(value) is not int:
        raise CorruptSessionError(
            f"session {session_id!r}: {column} holds {value!r}, not an integer",
            code="CORRUPT_SESSION",
        )
    return value


def _seq_gap(session_id: str, expected: int, found: int) -> CorruptSessionError:
    if found > expected:
        missing = f"events {expected}..{found - 1} are missing"
    else:
        missing = f"events from seq {found} are stored twice or past the stored next seq"
    return CorruptSessionError(f"session {session_id!r}: a seq gap: {missing}")


def seq_conflict(session_id: str, stored: int, first: int) -> StoreError:
    """The refusal of an append that does not start at the stored next seq."""
    return StoreError(
        f"session {session_id!r}: the stored log has {stored} events but the append starts at "
        f"seq {first}; another writer appended to it",
        code="SEQ_CONFLICT",
    )


def already_exists(session_id: str, why: str = "") -> StoreError:
    """The refusal of creating a session whose id is stored, or held by the writer *why* names."""
    return StoreError(f"session {session_id!r} already exists{why}", code="SESSION_ALREADY_EXISTS")


def held_elsewhere(session_id: str) -> StoreError:
    """The refusal of creating a session another store or process holds: maybe listed
    nowhere (not yet, or no more while a delete still holds it), so it says who has it,
    or the refusal would read as a mistake."""
    return already_exists(
        session_id, ": another store or process is creating, writing or deleting it"
    )


def claim_new_id(
    session_id: str,
    take: Callable[[], bool],
    release: Callable[[], None],
    stored: Callable[[], bool],
) -> None:
    """Claim *session_id*, not stored yet, by *take* (whether it took the lock now).

    Refused ``SESSION_ALREADY_EXISTS`` if another writer holds it (it is stored or
    being created: a create of it would be a duplicate, whichever commits first) or
    if it is stored, which is looked up once the lock is held: a writer that stored
    it and let it go is seen. A lock taken here is given up again on refusal.
    """
    try:
        taken = take()
    except StoreError as exc:
        if exc.code != "SESSION_LOCKED":
            raise
        raise held_elsewhere(session_id) from exc
    try:
        if stored():
            raise already_exists(session_id)
    except BaseException:
        if taken:
            release()
        raise


def cannot_open(session_id: str, what: str, exc: OSError, store: str) -> StoreError:
    """The failure to open *what* (a session's file or its lock file), out of files or not."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        message = (
            f"session {session_id!r}: the process ran out of open files ({exc.strerror}); "
            f"the {store} store keeps one open file per live session: raise the limit "
            "(ulimit -n) or use PostgresStore"
        )
    else:
        message = f"session {session_id!r}: cannot open {what}: {exc}"
    return StoreError(message, code="STORAGE_ERROR")


def lock_file(path: str) -> int | None:
    """Open and exclusively lock *path*; ``None`` if another open file holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            current = os.stat(path)
        except BlockingIOError:
            os.close(fd)
            return None
        except FileNotFoundError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if os.path.samestat(os.fstat(fd), current):
            return fd
        os.close(fd)  # unlinked and replaced by its releaser meanwhile


_STORE_WIDE_CODES = frozenset({"STORE_CLOSED", "LOCK_TABLE_FULL", "READ_ONLY", "TABLE_LOCKED"})
"""Codes of a StoreError a backend raises (rather than returns) for the whole store."""
_STORE_WIDE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
"""The file system itself failed: full, over quota, broken or read-only.

Not EMFILE: the JSONL store makes running out of descriptors one session's error."""
_STORE_WIDE_SQLITE = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_NOTADB,
    }
)
"""Primary SQLite result codes that concern the database file, not one row."""
_STORE_WIDE_SQLSTATE = frozenset({"08", "53", "57", "58", "XX"})
"""SQLSTATE classes of the server or connection: connection exception, insufficient
resources, operator intervention, system error, internal error."""


def storage_failed(exc: BaseException) -> bool:
    """Whether a write that raised *exc* failed for the whole store, not for one session.

    Such a failure (a busy or full database, a lost connection, a full disk)
    would fail each session of the group the same way, each after its own
    wait; anything else may be one session's (an event that cannot be encoded).
    """
    if isinstance(exc, StoreError):
        return exc.code in _STORE_WIDE_CODES
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        # No code: the connection itself (closed, used from the wrong thread).
        return code is None or code & 0xFF in _STORE_WIDE_SQLITE
    if isinstance(exc, OSError):
        return exc.errno in _STORE_WIDE_ERRNOS
    return _postgres_failed(exc)


def _postgres_failed(exc: BaseException) -> bool:
    psycopg = sys.modules.get("psycopg")  # never imported here: only its store raises its errors
    if psycopg is None or not isinstance(exc, psycopg.Error):
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is None:
        # A client-side failure of the connection carries no SQLSTATE.
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    return str(sqlstate)[:2] in _STORE_WIDE_SQLSTATE
