"""The embedded store: one SQLite database file (WAL) for many sessions."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import final

from retinue._errors import StoreError
from retinue.session._codec import encode_event, encode_header

from ._backend import AppendBatch, Listing, StoredLog
from ._common import (
    WaitedOutError,
    already_exists,
    check_cancelled,
    check_next_seq,
    claim_new_id,
    parse_header,
    parse_headers,
    segment_records,
    seq_conflict,
    stored_int,
)
from ._sqliteattempts import busy, in_short_attempts
from ._sqliteclaims import SessionLocks
from ._sqlitetables import (
    INSERT_SESSION,
    SCHEMA,
    SCHEMA_VERSION,
    SESSION_TO_APPEND,
    check_database_file,
    checked_segments,
    delete_rows,
    file_path,
    has_schema,
    next_seq_to_append,
    truncate_segments,
)
from ._writebehind import BufferedStore

__all__ = ["SCHEMA_VERSION", "SQLiteBackend", "SQLiteStore"]

_BUSY_TIMEOUT_MS = 30_000
"""How long a statement waits for another connection's lock (a commit: for its write lock)."""


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
    connections and never wait for a commit (WAL) and read text as bytes, so
    a row that is not UTF-8 is a corrupt record, not an I/O failure.

    One writer per session across stores and processes (R12.7): a claimed
    session holds an exclusive ``flock`` on ``<db>.locks/<escaped id>.lock``
    until it is released (or the process dies), ``<db>`` being the file's real
    path, however the store names it. Every method blocks.

    With ``create=False`` only an existing retinue database is opened, and the
    file is neither created, given a schema nor switched to WAL: for readers.

    The path names a file: ``":memory:"`` and ``""`` are refused, as every
    connection would open its own empty database (use ``MemoryStore``).
    """

    blocking = True
    durable = True
    writes_can_tear = False
    """Each write is one transaction: a crash keeps all of it or none (R11.8)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self._path = file_path(path)
        self._write_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        """Set by :meth:`close`: a read still in flight then closes its connection."""
        self._closing = threading.Event()
        """Set by :meth:`close` before it waits for a commit: one waiting for the write lock
        gives up."""
        self._create = create
        self._opened_file: tuple[int, int] | None = None
        """The device and inode of the file :meth:`open` opened: a commit checks it is still there."""
        # By the file's real path: reached through a link, it must not get claims of its own.
        self._claims = SessionLocks(os.path.realpath(self._path) + ".locks")

    def _connect(self) -> sqlite3.Connection:
        # For either, SQLite would say only that it is "unable to open database file".
        if os.path.isdir(self._path):
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a database file", self._path)
        directory = os.path.dirname(self._path)
        if not os.path.isdir(directory):
            raise FileNotFoundError(
                errno.ENOENT, "no such directory for the database file", directory
            )
        target, uri = self._path, False
        if not self._create:
            # mode=rw: a plain connect would leave an empty file at a path that has none.
            # The path's own bytes, as a plain connect opens it: a name that is no UTF-8
            # holds surrogates, which quote() would fail to encode.
            name = urllib.parse.quote(os.fsencode(self._path))
            target, uri = f"file:{name}?mode=rw", True
        conn = sqlite3.connect(
            target,
            uri=uri,
            isolation_level=None,
            check_same_thread=False,
            timeout=_BUSY_TIMEOUT_MS / 1000,
        )
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        return conn

    def open(self) -> None:
        """Create the schema on a new file, or check the version of an existing one.

        The check only reads, and comes first: a database that is not a
        retinue store is refused as it was found, in its own journal mode.
        """
        with self._write_lock:
            if self._writer is not None:
                return
            check_database_file(self._path)
            conn = self._connect()
            try:
                self._prepare_in_slices(conn)
            except BaseException:
                conn.close()
                raise
            self._writer = conn
            self._opened_file = _file_identity(self._path)
            self._claims.open()
            self._closing.clear()
            with self._readers_lock:
                self._closed = False

    def _prepare_in_slices(self, conn: sqlite3.Connection) -> None:
        """:meth:`_prepare`, waiting for another connection's lock in short attempts.

        A file another connection locks (a database in rollback-journal mode
        mid-write, or its schema being created) holds each statement for the whole
        busy timeout: one attempt would hold the open past a deadline or cancel of
        the trio task waiting for this thread, which ends the wait with
        ``trio.Cancelled`` instead. Each attempt starts over, and may redo what a
        failed one did (set the journal mode to WAL, which persists): each step of it
        is harmless to repeat, and the schema is created in one transaction.
        """
        try:
            in_short_attempts(
                conn,
                lambda: self._prepare(conn),
                between=check_cancelled,
                timeout_ms=_BUSY_TIMEOUT_MS,
            )
        except sqlite3.OperationalError as exc:
            if not busy(exc):
                raise
            raise WaitedOutError(
                f"opening the store: another connection held {self._path} locked through "
                f"the {_BUSY_TIMEOUT_MS / 1000:g} s busy timeout: {exc}",
                code="STORAGE_ERROR",
            ) from exc

    def _prepare(self, conn: sqlite3.Connection) -> None:
        # Its first statement reads the schema: it waits for a lock too.
        conn.execute("PRAGMA synchronous = FULL")
        schema_found = has_schema(conn, self._path)
        if not self._create:
            if not schema_found:
                raise StoreError(
                    f"{self._path} is not a retinue store (an empty database)",
                    code="UNSUPPORTED_SCHEMA",
                )
            return
        conn.execute("PRAGMA journal_mode = WAL")
        if not schema_found:
            self._migrate(conn)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Checked again under the write lock: another process may have created it.
            if not has_schema(conn, self._path):
                for statement in SCHEMA:
                    conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        """Claim, then commit every batch in one transaction; per-batch refusals roll back alone."""
        results = [
            None if batch.header is not None else self._claim_for(batch) for batch in batches
        ]
        if all(error is not None for error in results):
            # Every batch was refused: a transaction would write nothing, yet wait out
            # another connection's write lock and fail the refusals with it.
            return results
        with self._write_lock:
            conn = self._require_writer()
            moved = self._moved_refusals(batches)
            if moved is not None:
                return moved
            claimed: list[str] = []
            self._begin(conn)
            try:
                for index, batch in enumerate(batches):
                    if results[index] is None:
                        results[index] = self._write_savepoint(conn, batch, claimed)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                for session_id in claimed:
                    self._claims.release(session_id)
                raise
            return results

    def _moved_refusals(self, batches: Sequence[AppendBatch]) -> list[StoreError | None] | None:
        """A refusal of each batch if the database file was removed or replaced since it was
        opened, else ``None``.

        The open connections still write to the file out of place, and SQLite reports
        no error: each commit would be acknowledged and lost with it. One ``stat`` per group.
        """
        if _file_identity(self._path) == self._opened_file:
            return None
        return [
            StoreError(
                f"session {batch.session_id!r}: {self._path} was removed or replaced while "
                "the store was open; nothing is committed to the file out of place",
                code="STORAGE_ERROR",
            )
            for batch in batches
        ]

    def _begin(self, conn: sqlite3.Connection) -> None:
        """Begin a commit, waiting for another connection's write lock in short attempts.

        One attempt waiting the whole busy timeout would hold :meth:`close` (and
        a store's exit under a deadline) for as long: a close ends the wait with
        ``STORE_CLOSED``, its events left buffered; so does a cancel of the trio
        task waiting for this thread, with ``trio.Cancelled`` (nothing is written
        yet; the writer task's shielded commits are never cancelled). Raises
        ``SQLITE_BUSY`` once the busy timeout is over.
        """
        in_short_attempts(
            conn,
            lambda: conn.execute("BEGIN IMMEDIATE"),
            between=self._stop_if_closing,
            timeout_ms=_BUSY_TIMEOUT_MS,
        )

    def _stop_if_closing(self) -> None:
        """End a wait for a lock if the store is closing or the waiting trio task is cancelled."""
        if self._closing.is_set():
            raise StoreError(f"{self._path} is closing", code="STORE_CLOSED")
        check_cancelled()

    def _claim_for(self, batch: AppendBatch) -> StoreError | None:
        """Claim a stored session appended to without a load (as JSONL opens its file)."""
        try:
            self.claim(batch.session_id)
        except StoreError as exc:
            return exc
        return None

    def _write_savepoint(
        self, conn: sqlite3.Connection, batch: AppendBatch, claimed: list[str]
    ) -> StoreError | None:
        conn.execute("SAVEPOINT batch")
        try:
            self._write_one(conn, batch)
            # Claimed inside the transaction: once the row is visible its writer holds it.
            if batch.header is not None and self._claims.acquire(batch.session_id):
                claimed.append(batch.session_id)
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
                    INSERT_SESSION,
                    (session_id, encode_header(batch.header), batch.header.created_at),
                )
            except sqlite3.IntegrityError:
                raise already_exists(session_id) from None
            sid, stored = int(cursor.lastrowid or 0), 0
        else:
            row = conn.execute(SESSION_TO_APPEND, (session_id,)).fetchone()
            if row is None:
                raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
            sid, stored = row[0], next_seq_to_append(row[1], row[2], session_id)
        if batch.truncate_to is not None:
            truncate_segments(conn, sid, batch.truncate_to, session_id)
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
            # One read transaction, so the rows and next_seq are one commit's snapshot:
            # read apart, a commit between them looks like a seq gap. The reader
            # stays in autocommit mode; _reader rolls back a transaction left open.
            conn.execute("BEGIN")
            row = conn.execute(
                "SELECT sid, CAST(header AS BLOB), next_seq FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            sid, header, next_seq = row
            segments = conn.execute(
                "SELECT first_seq, count, CAST(body AS BLOB) FROM segments WHERE sid = ? "
                "ORDER BY first_seq",
                (sid,),
            ).fetchall()
            conn.execute("COMMIT")
        parsed = parse_header(header, session_id)
        next_seq = stored_int(next_seq, session_id, "sessions.next_seq")
        check_next_seq(next_seq, session_id, "sessions.next_seq")
        records = segment_records(
            session_id, checked_segments(session_id, segments), next_seq, b"\n"
        )
        return StoredLog(parsed, records)

    def listing(self) -> Listing:
        """Every stored session's header (corrupt ones are skipped, each with why)."""
        with self._reader() as conn:
            rows = conn.execute(
                "SELECT CAST(id AS BLOB), CAST(header AS BLOB), next_seq FROM sessions"
            ).fetchall()
        return parse_headers(
            [(raw.decode(errors="replace"), header, next_seq) for raw, header, next_seq in rows],
            "sessions.next_seq",
        )

    def contains(self, session_id: str) -> bool:
        """Whether a row for the session exists."""
        with self._reader() as conn:
            row = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None

    def claim(self, session_id: str) -> None:
        """Lock the session's lock file until :meth:`release`; ``SESSION_LOCKED`` if held elsewhere.

        An unstored session raises ``SESSION_NOT_FOUND`` without locking: its
        creator claims it as its first commit inserts the row, and a probe for
        the id must not make that commit fail.
        """
        if self._claims.holds(session_id):
            return
        if not self.contains(session_id):
            raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
        self._claims.acquire(session_id)

    def delete(self, session_id: str) -> None:
        """Delete the session's rows in one transaction; ``SESSION_NOT_FOUND`` if it has none.

        Its caller holds its claim: no commit appends to it meanwhile, here or elsewhere."""
        with self._write_lock:
            conn = self._require_writer()
            self._begin(conn)
            try:
                found = delete_rows(conn, session_id)
                conn.execute("COMMIT" if found else "ROLLBACK")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        if not found:
            raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")

    def claim_new(self, session_id: str) -> None:
        """Lock a session not stored yet for its creator; ``SESSION_ALREADY_EXISTS`` if it is
        stored or locked elsewhere. Its first commit keeps the lock taken here."""
        claims = self._claims
        claim_new_id(
            session_id,
            lambda: claims.acquire(session_id),
            lambda: claims.release(session_id),
            lambda: self.contains(session_id),
        )

    def release(self, session_id: str) -> None:
        """Drop the session's lock (and its lock file)."""
        self._claims.release(session_id)

    def close(self) -> None:
        """Close every connection (the WAL is checkpointed by the last one) and drop every claim.

        Claims are dropped once a commit in flight is over: a create it commits
        claims its session, and a claim taken after this close would hold the
        session for no one until the process exits. A commit still waiting for
        another connection's write lock gives up first.
        """
        self._closing.set()
        with self._write_lock:
            self._claims.release_all()
            with self._readers_lock:
                self._closed = True
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
            if self._closed:
                raise StoreError(f"{self._path} is not open", code="STORE_CLOSED")
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            conn = self._connect()
        try:
            yield conn
        finally:
            self._put_back(conn)

    def _put_back(self, conn: sqlite3.Connection) -> None:
        """Pool a reader again; once the store has closed (a read in flight), close it instead."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except BaseException:
            conn.close()
            raise
        with self._readers_lock:
            if not self._closed:
                self._readers.append(conn)
                return
        conn.close()


def _file_identity(path: str) -> tuple[int, int] | None:
    """The device and inode of the file at *path*, ``None`` if there is none."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


@final
class SQLiteStore(BufferedStore):
    """The embedded durable store: one SQLite file (WAL, ``synchronous=FULL``) for many sessions.

    ``async with SQLiteStore("sessions.db") as store:`` runs one writer task
    that group-commits concurrent flushes; all I/O happens in worker threads.
    ``create=False`` opens only an existing store and changes nothing about the
    file (no schema, no journal mode): what a reader of someone's store wants.

    Raises:
        ConfigError: ``INVALID_STORE_PATH``: *path* is empty, ``":memory:"``
            (an in-memory store is ``MemoryStore``) or holds a NUL character.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        super().__init__(
            SQLiteBackend(path, create=create), name=f"SQLiteStore({os.fspath(path)!r})"
        )
