"""The embedded store: one SQLite database file (WAL) for many sessions."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from typing import final

from retinue._errors import StoreError
from retinue.session import SessionHeader
from retinue.session._codec import encode_event, encode_header

from ._backend import AppendBatch, StoredLog
from ._common import already_exists, parse_header, parse_headers, seq_conflict
from ._writebehind import BufferedStore

__all__ = ["SCHEMA_VERSION", "SQLiteBackend", "SQLiteStore"]

SCHEMA_VERSION = 1
_SCHEMA = (
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


@final
class SQLiteBackend:
    """A ``sessions`` row per session and a ``segments`` row per committed batch.

    A segment holds the canonical lines of a batch's events, newline-joined,
    from ``first_seq`` on: one row per session per commit instead of one per
    event, which is what makes group commit cheap. One write connection
    commits each group in one ``BEGIN IMMEDIATE`` transaction
    (``synchronous=FULL``: one fsync); a SAVEPOINT per session keeps one
    session's refusal from failing the group, and the stored ``next_seq`` is
    checked so a second writer cannot interleave. Reads use their own
    connections and never wait for a commit (WAL). Every method blocks.
    """

    blocking = True
    durable = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._write_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False, timeout=30
        )
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def open(self) -> None:
        """Create the schema on a new file, or check the version of an existing one."""
        with self._write_lock:
            if self._writer is not None:
                return
            conn = self._connect()
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                self._migrate(conn)
            except BaseException:
                conn.close()
                raise
            self._writer = conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if tables:
                    raise StoreError(
                        f"{self._path} is an SQLite database without a retinue schema",
                        code="UNSUPPORTED_SCHEMA",
                    )
                for statement in _SCHEMA:
                    conn.execute(statement)
            elif version != SCHEMA_VERSION:
                raise StoreError(
                    f"{self._path} has schema version {version}; this retinue reads {SCHEMA_VERSION}",
                    code="UNSUPPORTED_SCHEMA",
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        """Commit every batch in one transaction; per-batch refusals roll back alone."""
        with self._write_lock:
            conn = self._require_writer()
            conn.execute("BEGIN IMMEDIATE")
            try:
                results = [self._write_savepoint(conn, batch) for batch in batches]
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return results

    def _write_savepoint(self, conn: sqlite3.Connection, batch: AppendBatch) -> StoreError | None:
        conn.execute("SAVEPOINT batch")
        try:
            self._write_one(conn, batch)
        except StoreError as exc:
            conn.execute("ROLLBACK TO batch")
            conn.execute("RELEASE batch")
            return exc
        conn.execute("RELEASE batch")
        return None

    def _write_one(self, conn: sqlite3.Connection, batch: AppendBatch) -> None:
        session_id = batch.session_id
        if batch.header is not None:
            try:
                cursor = conn.execute(
                    "INSERT INTO sessions (id, header, created_at, next_seq) VALUES (?, ?, ?, 0)",
                    (session_id, encode_header(batch.header), batch.header.created_at),
                )
            except sqlite3.IntegrityError:
                raise already_exists(session_id) from None
            sid, stored = int(cursor.lastrowid or 0), 0
        else:
            row = conn.execute(
                "SELECT sid, next_seq FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
            sid, stored = row
        if batch.truncate_to is not None:
            _truncate(conn, sid, batch.truncate_to)
            stored = batch.truncate_to
        if stored != batch.first_seq:
            raise seq_conflict(session_id, stored, batch.first_seq)
        if batch.events:
            body = "\n".join([encode_event(event) for event in batch.events])
            conn.execute(
                "INSERT INTO segments (sid, first_seq, count, body) VALUES (?, ?, ?, ?)",
                (sid, batch.first_seq, len(batch.events), body),
            )
        next_seq = batch.first_seq + len(batch.events)
        conn.execute("UPDATE sessions SET next_seq = ? WHERE sid = ?", (next_seq, sid))

    def read(self, session_id: str) -> StoredLog | None:
        """The header and event lines of one session, in seq order."""
        with self._reader() as conn:
            row = conn.execute(
                "SELECT sid, header FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                return None
            sid, header = row
            segments = conn.execute(
                "SELECT body FROM segments WHERE sid = ? ORDER BY first_seq", (sid,)
            ).fetchall()
        records = [line for (body,) in segments for line in body.split("\n")]
        return StoredLog(parse_header(header, session_id), records)

    def headers(self) -> list[SessionHeader]:
        """Every header of a session with events (corrupt ones are logged and skipped)."""
        with self._reader() as conn:
            rows = conn.execute("SELECT id, header FROM sessions WHERE next_seq > 0").fetchall()
        return parse_headers(rows)

    def contains(self, session_id: str) -> bool:
        """Whether a row for the session exists."""
        with self._reader() as conn:
            row = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None

    def claim(self, session_id: str) -> None:
        """Within a file, appends are checked against the stored next seq instead."""

    def release(self, session_id: str) -> None:
        """Nothing is held per session."""

    def close(self) -> None:
        """Close every connection (the WAL is checkpointed by the last one)."""
        with self._write_lock, self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def _require_writer(self) -> sqlite3.Connection:
        if self._writer is None:
            raise StoreError(f"{self._path} is not open", code="STORE_CLOSED")
        return self._writer

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        with self._readers_lock:
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            conn = self._connect()
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            with self._readers_lock:
                self._readers.append(conn)


def _truncate(conn: sqlite3.Connection, sid: int, keep: int) -> None:
    """Drop stored events with ``seq >= keep``, cutting a segment that straddles it."""
    conn.execute("DELETE FROM segments WHERE sid = ? AND first_seq >= ?", (sid, keep))
    row = conn.execute(
        "SELECT first_seq, body FROM segments WHERE sid = ? ORDER BY first_seq DESC LIMIT 1", (sid,)
    ).fetchone()
    if row is None:
        return
    first, body = row
    lines = body.split("\n")
    if first + len(lines) > keep:
        kept = lines[: keep - first]
        conn.execute(
            "UPDATE segments SET count = ?, body = ? WHERE sid = ? AND first_seq = ?",
            (len(kept), "\n".join(kept), sid, first),
        )


@final
class SQLiteStore(BufferedStore):
    """The embedded durable store: one SQLite file (WAL, ``synchronous=FULL``) for many sessions.

    ``async with SQLiteStore("sessions.db") as store:`` runs one writer task
    that group-commits concurrent flushes; all I/O happens in worker threads.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(SQLiteBackend(path), name=f"SQLiteStore({os.fspath(path)!r})")
