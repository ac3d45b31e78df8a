"""The SQLite store's file and tables: its path, the schema and its version, segment rows."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Sequence

from retinue._errors import ConfigError, CorruptSessionError, StoreError

from ._common import refuse_unnamable, stored_int

__all__ = [
    "INSERT_SESSION",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SESSION_TO_APPEND",
    "check_database_file",
    "checked_segments",
    "delete_rows",
    "file_path",
    "has_schema",
    "next_seq_to_append",
    "truncate_segments",
]

SCHEMA_VERSION = 1
SCHEMA = (
    """CREATE TABLE sessions (
        sid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        header TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        next_seq INTEGER NOT NULL
    )""",
    """CREATE TABLE segments (
        sid INTEGER NOT NULL REFERENCES sessions (sid),
        first_seq INTEGER NOT NULL,
        count INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (sid, first_seq)
    )""",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
INSERT_SESSION = """INSERT INTO sessions (sid, id, header, created_at, next_seq) VALUES (
    1 + max(coalesce((SELECT max(sid) FROM sessions), 0),
            coalesce((SELECT max(sid) FROM segments), 0)),
    ?, ?, ?, 0)"""
"""A new session's row, its ``sid`` one past the largest any table still holds.

Segments whose session row was deleted by hand (the ``sqlite3`` shell leaves
foreign keys unenforced) keep their sid; SQLite's own choice for an
``INTEGER PRIMARY KEY`` reuses the largest deleted one, and every segment the
new session then writes would collide with them. Both maxima are read off the
primary keys' indexes, so a create costs no scan.
"""


def file_path(path: str | os.PathLike[str]) -> str:
    """*path* as an absolute string; ``ConfigError`` for the names SQLite opens as an
    in-memory database, and for a path no file can have (one holding a NUL, or a
    character the file system's encoding cannot write).

    Each of the store's connections would open its own, empty one, so reads would
    never see a write; an in-memory store is ``MemoryStore``. Made absolute once:
    connections are opened later, and a relative path would then name a file in
    whatever the working directory has become.
    """
    refuse_unnamable(path, what="SQLiteStore path")
    text = os.fspath(path)
    if text in ("", ":memory:"):
        raise ConfigError(
            f"SQLiteStore needs a database file, not {text!r}: an in-memory SQLite "
            "database is private to one connection; use MemoryStore for a store in memory",
            code="INVALID_STORE_PATH",
        )
    # Joined, not normalized: ``link/../x`` names what opening it names, past the link.
    return text if os.path.isabs(text) else os.path.join(os.getcwd(), text)


_SQLITE_HEADER = b"SQLite format 3\0"


def check_database_file(path: str) -> None:
    """Refuse a file at *path* holding bytes that do not start as an SQLite database does.

    SQLite takes a file shorter than a database header for an empty database and
    writes a new one over it (a mistyped path naming someone's notes, say), and
    says of a longer one only that it "is not a database", naming no file. An
    empty file, or none, is a new database; what cannot be read is left for
    SQLite to refuse in its own words, and so is a file beside a rollback journal
    (a first transaction a crash cut short, which SQLite rolls back).

    Raises:
        StoreError: ``UNSUPPORTED_SCHEMA``, naming *path*.
    """
    try:
        # Non-blocking: a FIFO at the path would hold the open until a writer came.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        head = os.read(fd, len(_SQLITE_HEADER)) if regular else b""
    except OSError:
        return
    finally:
        os.close(fd)
    if head and head != _SQLITE_HEADER and not os.path.exists(f"{path}-journal"):
        raise StoreError(
            f"{path} is not an SQLite database: what it holds does not start with the SQLite "
            "header, and nothing is written over it",
            code="UNSUPPORTED_SCHEMA",
        )


SESSION_TO_APPEND = """SELECT sid, next_seq, (
    SELECT first_seq + count FROM segments WHERE sid = sessions.sid
    ORDER BY first_seq DESC LIMIT 1
) FROM sessions WHERE id = ?"""
"""A session's row, and where its last segment ends: one descent of the segments' key, in the
statement that reads the row."""


def next_seq_to_append(value: object, segments_end: object, session_id: str) -> int:
    """The stored next seq an append must start at, if the last segment ends there (it ends
    at 0 if there is none); a ``StoreError`` refuses this batch alone.

    Segments deleted or cut by hand would leave the appended events after a gap,
    and the session unloadable: the append is refused instead.
    """
    try:
        next_seq = stored_int(value, session_id, "sessions.next_seq")
    except CorruptSessionError as exc:
        raise StoreError(exc.message, code=exc.code) from exc
    end = 0 if segments_end is None else segments_end
    if end != next_seq:
        raise StoreError(
            f"session {session_id!r}: its stored segments end at seq {end!r} but "
            f"sessions.next_seq says {next_seq} (changed by hand): nothing is appended to it",
            code="CORRUPT_SESSION",
        )
    return next_seq


def checked_segments(
    session_id: str, segments: Sequence[tuple[object, object, bytes]]
) -> list[tuple[int, int, bytes]]:
    """The ``(first_seq, count, body)`` rows of *session_id*, each number checked an integer."""
    checked: list[tuple[int, int, bytes]] = []
    for first, count, body in segments:
        first_seq = stored_int(first, session_id, "segments.first_seq")
        column = f"segments.count of the segment from seq {first_seq}"
        checked.append((first_seq, stored_int(count, session_id, column), body))
    return checked


def has_schema(conn: sqlite3.Connection, path: str) -> bool:
    """Whether the database holds this retinue's schema (false if it is empty); reads only.

    Raises ``UNSUPPORTED_SCHEMA`` for another application's database or another schema version.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return True
    if version != 0:
        raise StoreError(
            f"{path} has schema version {version}; this retinue reads {SCHEMA_VERSION}",
            code="UNSUPPORTED_SCHEMA",
        )
    if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise StoreError(
            f"{path} is an SQLite database without a retinue schema", code="UNSUPPORTED_SCHEMA"
        )
    return False


def truncate_segments(conn: sqlite3.Connection, sid: int, keep: int, session_id: str) -> None:
    """Drop stored events with ``seq >= keep``, cutting a segment that straddles it.

    The body is read as bytes: the torn tail may not be UTF-8; the kept lines were decoded.
    """
    conn.execute("DELETE FROM segments WHERE sid = ? AND first_seq >= ?", (sid, keep))
    row = conn.execute(
        "SELECT first_seq, CAST(body AS BLOB) FROM segments WHERE sid = ? "
        "ORDER BY first_seq DESC LIMIT 1",
        (sid,),
    ).fetchone()
    if row is None:
        return
    first, body = row
    lines = body.split(b"\n")
    if first + len(lines) > keep:
        kept = lines[: keep - first]
        try:
            body = b"\n".join(kept).decode()
        except UnicodeDecodeError as exc:
            # Changed since the load decoded it: refuse the repair rather than store garbage.
            raise StoreError(
                f"session {session_id!r}: an event record before seq {keep} is not UTF-8 ({exc})",
                code="CORRUPT_SESSION",
            ) from None
        conn.execute(
            "UPDATE segments SET count = ?, body = ? WHERE sid = ? AND first_seq = ?",
            (len(kept), body, sid, first),
        )


def delete_rows(conn: sqlite3.Connection, session_id: str) -> bool:
    """Delete the session's row and its segments in *conn*'s open transaction; whether stored.

    Its segments first: a row gone before them would leave them to no session."""
    row = conn.execute("SELECT sid FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        return False
    conn.execute("DELETE FROM segments WHERE sid = ?", (row[0],))
    conn.execute("DELETE FROM sessions WHERE sid = ?", (row[0],))
    return True
