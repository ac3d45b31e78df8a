"""The embedded store: one SQLite database file (WAL) for many sessions."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import final

from retinue._errors import ConfigError, CorruptSessionError, StoreError
from retinue.session._codec import encode_event, encode_header

from ._backend import AppendBatch, Listing, StoredLog
from ._common import (
    already_exists,
    cannot_open,
    lock_file,
    parse_header,
    parse_headers,
    refuse_nul,
    segment_records,
    seq_conflict,
    stored_int,
)
from ._ids import file_stem
from ._writebehind import BufferedStore

__all__ = ["SCHEMA_VERSION", "SQLiteBackend", "SQLiteStore"]

SCHEMA_VERSION = 1
_BUSY_TIMEOUT_MS = 30_000
"""How long a statement waits for another connection's lock (a commit: for its write lock)."""
_BEGIN_SLICE_MS = 100
"""How long each attempt of a commit to take the write lock waits: between two, a close
ends the wait (SQLite's busy wait does not heed an interrupt)."""
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
        self._path = _file_path(path)
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
        # By the file's real path: reached through a link, it must not get claims of its own.
        self._claims = _SessionLocks(os.path.realpath(self._path) + ".locks")

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
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def open(self) -> None:
        """Create the schema on a new file, or check the version of an existing one.

        The check only reads, and comes first: a database that is not a
        retinue store is refused as it was found, in its own journal mode.
        """
        with self._write_lock:
            if self._writer is not None:
                return
            conn = self._connect()
            try:
                self._prepare(conn)
            except BaseException:
                conn.close()
                raise
            self._writer = conn
            self._claims.open()
            self._closing.clear()
            with self._readers_lock:
                self._closed = False

    def _prepare(self, conn: sqlite3.Connection) -> None:
        has_schema = _has_schema(conn, self._path)
        if not self._create:
            if not has_schema:
                raise StoreError(
                    f"{self._path} is not a retinue store (an empty database)",
                    code="UNSUPPORTED_SCHEMA",
                )
            return
        conn.execute("PRAGMA journal_mode = WAL")
        if not has_schema:
            self._migrate(conn)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Checked again under the write lock: another process may have created it.
            if not _has_schema(conn, self._path):
                for statement in _SCHEMA:
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

    def _begin(self, conn: sqlite3.Connection) -> None:
        """Begin a commit, waiting for another connection's write lock in short attempts.

        One attempt waiting the whole busy timeout would hold :meth:`close` (and
        a store's exit under a deadline) for as long: a close ends the wait with
        ``STORE_CLOSED``, its events left buffered. Raises ``SQLITE_BUSY`` once
        the busy timeout is over.
        """
        give_up = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
        conn.execute(f"PRAGMA busy_timeout = {_BEGIN_SLICE_MS}")
        try:
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    code = getattr(exc, "sqlite_errorcode", None)
                    busy = code is not None and code & 0xFF == sqlite3.SQLITE_BUSY
                    if not busy or time.monotonic() >= give_up:
                        raise
                if self._closing.is_set():
                    raise StoreError(f"{self._path} is closing", code="STORE_CLOSED")
        finally:
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")

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
            sid, stored = row[0], _next_seq_to_append(row[1], session_id)
        if batch.truncate_to is not None:
            _truncate(conn, sid, batch.truncate_to, session_id)
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
        records = segment_records(session_id, _checked(session_id, segments), next_seq, b"\n")
        return StoredLog(parsed, records)

    def listing(self) -> Listing:
        """Every header of a session with events (corrupt ones are skipped, each with why)."""
        with self._reader() as conn:
            rows = conn.execute(
                "SELECT CAST(id AS BLOB), CAST(header AS BLOB) FROM sessions WHERE next_seq > 0"
            ).fetchall()
        return parse_headers([(raw.decode(errors="replace"), header) for raw, header in rows])

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


def _file_path(path: str | os.PathLike[str]) -> str:
    """*path* as an absolute string; ``ConfigError`` for the names SQLite opens as an
    in-memory database, and for a path no file can have (one holding a NUL).

    Each of the store's connections would open its own, empty one, so reads would
    never see a write; an in-memory store is ``MemoryStore``. Made absolute once:
    connections are opened later, and a relative path would then name a file in
    whatever the working directory has become.
    """
    refuse_nul(path, what="SQLiteStore path")
    text = os.fspath(path)
    if text in ("", ":memory:"):
        raise ConfigError(
            f"SQLiteStore needs a database file, not {text!r}: an in-memory SQLite "
            "database is private to one connection; use MemoryStore for a store in memory",
            code="INVALID_STORE_PATH",
        )
    # Joined, not normalized: ``link/../x`` names what opening it names, past the link.
    return text if os.path.isabs(text) else os.path.join(os.getcwd(), text)


def _next_seq_to_append(value: object, session_id: str) -> int:
    """The stored next seq an append must start at; a ``StoreError`` refuses this batch alone."""
    try:
        return stored_int(value, session_id, "sessions.next_seq")
    except CorruptSessionError as exc:
        raise StoreError(exc.message, code=exc.code) from exc


def _checked(
    session_id: str, segments: Sequence[tuple[object, object, bytes]]
) -> list[tuple[int, int, bytes]]:
    """The ``(first_seq, count, body)`` rows of *session_id*, each number checked an integer."""
    checked: list[tuple[int, int, bytes]] = []
    for first, count, body in segments:
        first_seq = stored_int(first, session_id, "segments.first_seq")
        column = f"segments.count of the segment from seq {first_seq}"
        checked.append((first_seq, stored_int(count, session_id, column), body))
    return checked


def _has_schema(conn: sqlite3.Connection, path: str) -> bool:
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


def _truncate(conn: sqlite3.Connection, sid: int, keep: int, session_id: str) -> None:
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


@final
class _SessionLocks:
    """The claimed sessions of one backend: an open, ``flock``-ed lock file each.

    ``flock`` conflicts between open file descriptions, so two stores in one
    process exclude each other as two processes do; a killed process drops
    its locks. A released lock file is unlinked while still locked, so the
    directory holds only live claims (a lock won on an unlinked file is retried).
    """

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._held: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def open(self) -> None:
        """Take claims again after :meth:`release_all` (the backend reopened)."""
        with self._lock:
            self._closed = False

    def holds(self, session_id: str) -> bool:
        """Whether *session_id* is claimed here."""
        with self._lock:
            return session_id in self._held

    def acquire(self, session_id: str) -> bool:
        """Lock *session_id*; false if it was already held here. Raises ``SESSION_LOCKED``."""
        with self._lock:
            if self._closed:
                raise StoreError(
                    f"session {session_id!r}: the SQLite store is closed", code="STORE_CLOSED"
                )
            if session_id in self._held:
                return False
            path = os.path.join(self._directory, _lock_name(session_id))
            try:
                os.makedirs(self._directory, exist_ok=True)
                fd = lock_file(path)
            except OSError as exc:
                raise cannot_open(session_id, "its lock file", exc, "SQLite") from exc
            if fd is None:
                raise StoreError(
                    f"session {session_id!r} is being written by another process or store",
                    code="SESSION_LOCKED",
                )
            self._held[session_id] = (path, fd)
            return True

    def release(self, session_id: str) -> None:
        with self._lock:
            held = self._held.pop(session_id, None)
        if held is not None:
            path, fd = held
            with contextlib.suppress(OSError):
                os.unlink(path)
            os.close(fd)

    def release_all(self) -> None:
        """Drop every claim and refuse new ones until :meth:`open`."""
        with self._lock:
            self._closed = True
            held = list(self._held)
        for session_id in held:
            self.release(session_id)


def _lock_name(session_id: str) -> str:
    return f"{file_stem(session_id)}.lock"


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
