"""The shared store's backend: PostgreSQL through psycopg 3's sync API, run in worker threads.

Its connections: one that writes (group commits), pooled readers and the lock connection of
the claims (:mod:`._pgclaims`); :mod:`._pgstore` puts write-behind in front of it."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, final

from retinue._errors import StoreError

from . import _pgreaders
from ._backend import AppendBatch, Listing, StoredLog
from ._common import check_next_seq, parse_header, parse_headers, segment_records
from ._pgclaims import SessionClaims
from ._pgdeletes import TableDeletes
from ._pgreaders import ReaderPool
from ._pgrefusals import (
    check_dsn,
    claim_refusal,
    lock_table_full,
    out_of_locks,
    row_locked,
    unknown_outcomes,
)
from ._pgschema import (
    SCHEMA_VERSION,
    check_cancelled,
    check_schema_in_attempts,
    connect_cancellably,
    connect_waited_out,
    in_lock_attempts,
    in_schema,
    locked_tables,
    migrate_in_attempts,
    not_open,
    psycopg_module,
    ran_within_lock_timeout,
    read_only_refused,
    table_locked,
    until_lock_free,
)
from ._pgsocket import cancel_soon, connect_endable, held_in_slices, shut_down
from ._pgsql import SessionTables

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "PostgresBackend"]

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_WRITE_LOCK_TIMEOUT_MS = 30_000
"""How long a commit, or an open creating the tables, waits for a lock held elsewhere: the
group fails, its events stay buffered; the open fails."""
_LOCK_ATTEMPT_MS = 100
"""How long each attempt of a commit or an open waits for a lock held elsewhere (the write
connection's lock_timeout, and that of a read-only open's schema read): between two, a cancel
of a flush committing on its own or of an entry, or a close, ends the wait (the server's wait
heeds neither)."""
_CLOSE_WAIT_SECONDS = 2.0
"""How long a close waits for a commit it cancelled before it ends the connections the commit
waits on: a server that answers ends it sooner, a silent one never does."""


@final
class PostgresBackend(TableDeletes):
    """Tables ``retinue_sessions`` and ``retinue_segments`` in one schema; every method blocks.

    As in the SQLite store, a segment row holds the canonical lines of one
    committed batch (one row per session per group commit).

    One write connection commits each group in one transaction: it locks the
    group's session rows, checks each batch's next seq, then COPYs the events.
    One writer per session across processes: a session-level advisory lock per
    attached session, held on a dedicated connection and released by detach
    (or by the server when the process dies). A claim also waits for a commit
    the previous writer still has in flight, so that a load reads the final log
    (:class:`SessionClaims`).

    With ``create=False`` open only reads the schema version: tables that are
    missing are refused, never created, and the write and lock connections
    are made by the first write or claim, so a reader needs only SELECT.
    """

    blocking = True
    durable = True
    writes_can_tear = False
    """Each write is one transaction: a crash keeps all of it or none (R11.8)."""

    def __init__(self, dsn: str, *, schema: str = "public", create: bool = True) -> None:
        if not isinstance(dsn, str):
            # Its type alone: a DSN's value may hold a password.
            raise TypeError(
                f"PostgresStore dsn must be a str (a libpq connection string or URI), "
                f"not {type(dsn).__name__}"
            )
        if not _SCHEMA_NAME.match(schema):
            raise StoreError(f"invalid schema name {schema!r}", code="INVALID_CONFIG")
        check_dsn(dsn)
        self._dsn = dsn
        self._schema = schema
        self._create = create
        self._writer: psycopg.Connection[Any] | None = None
        self._write_lock = threading.Lock()
        self._pool = ReaderPool(schema, lambda: self._connect(autocommit=True, endable=True))
        self._claims = SessionClaims(schema, dsn, self._connect, self._pool)
        self._unsure: set[str] = set()
        self._tables = SessionTables(schema, self._claims, self._unsure)
        self._committing = threading.local()
        """Whether this thread runs :meth:`write`, whose connections only a close gives up."""
        self._closing = threading.Event()
        """Set by :meth:`close` before it waits for a commit: a connect of it gives up."""
        self._closed = True

    def _sql(self, text: str) -> str:
        return in_schema(self._schema, text)

    def _connect(
        self,
        *,
        autocommit: bool = True,
        give_up: Callable[[], None] | None = None,
        endable: bool = False,
        **params: Any,
    ) -> psycopg.Connection[Any]:
        """A new connection (libpq *params*), given up once *give_up* raises: by default,
        once the store closes and, outside a commit, if its task is cancelled; *endable*:
        one a close can end by shutting its socket down (:func:`shut_down`).

        A commit's connection is given up only by :meth:`close`: nothing of the
        group is sent before it is made, and once sent, a write is done whole."""

        def connect() -> psycopg.Connection[Any]:
            # UTF-8 whatever the DSN or PGCLIENTENCODING ask: events hold any Unicode text.
            made = connect_endable if endable else psycopg_module().connect
            return made(self._dsn, autocommit=autocommit, client_encoding="UTF8", **params)

        committing = getattr(self._committing, "active", False)
        default = self._check_not_closing if committing else self._between_attempts
        return connect_cancellably(connect, give_up or default)

    def _check_not_closing(self) -> None:
        """Refuse to wait on for a connection once :meth:`close` has begun."""
        if self._closing.is_set():
            raise not_open()

    def open(self) -> None:
        """Connect, then create the tables (under a lock) or, with ``create=False``, check them."""
        with self._write_lock, connect_waited_out():
            if not self._closed:
                return
            self._closing.clear()
            if not self._create:
                self._open_existing()
                return
            writer = self._connect_writer()
            try:
                with read_only_refused(
                    f"creating the tables of schema {self._schema!r}",
                    "a store that only reads opens with create=False",
                ):
                    migrate_in_attempts(writer, self._schema, timeout_ms=_WRITE_LOCK_TIMEOUT_MS)
                self._claims.open()
            except BaseException:
                writer.close()
                raise
            self._writer = writer
            self._closed = False
            self._pool.open()

    def _open_existing(self) -> None:
        """Read the schema version on what becomes the first pooled reader; write nothing."""
        conn = self._pool.connect()
        try:
            check_schema_in_attempts(
                conn,
                self._schema,
                timeout_ms=_pgreaders._READ_LOCK_TIMEOUT_MS,
                attempt_ms=_LOCK_ATTEMPT_MS,
            )
            self._claims.open(connect=False)
        except BaseException:
            conn.close()
            raise
        self._closed = False
        self._pool.open(conn)

    # -- writes ---------------------------------------------------------------

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        """Claim unclaimed sessions, then commit every accepted batch in one transaction.

        A lock taken here is given up if its batch is refused or the group fails (R12.7).
        A read-only server fails the group with ``READ_ONLY``, which fails every group."""
        self._committing.active = True
        try:
            with read_only_refused("a group commit"):
                return self._write(batches)
        finally:
            self._committing.active = False

    def _write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        results: list[StoreError | None] = [None] * len(batches)
        taken = self._claim_all(batches, results)
        if all(error is not None for error in results):
            # Every batch was refused and no lock taken: a transaction would write nothing,
            # yet wait out any lock on the tables and fail the refusals with it.
            return results
        try:
            with self._write_lock:
                self._commit_group_in_attempts(batches, results)
        except BaseException as exc:
            # The commit may have happened with its reply lost: let a retry recognise its create.
            self._unsure.update(batch.session_id for batch in batches if batch.header)
            self._release_all(taken)
            if out_of_locks(exc):
                raise lock_table_full("a group commit") from exc
            if isinstance(exc, StoreError) and exc.code == "COMMIT_UNKNOWN":
                return unknown_outcomes(batches, results, exc)
            raise
        outcomes = list(zip(batches, results, strict=True))
        self._unsure.difference_update(batch.session_id for batch, error in outcomes if not error)
        self._release_all(taken & {batch.session_id for batch, error in outcomes if error})
        return results

    def _commit_group_in_attempts(
        self, batches: Sequence[AppendBatch], results: list[StoreError | None]
    ) -> None:
        """Commit the group, waiting for a lock held elsewhere in short attempts.

        Each attempt that meets the lock rolls back, having written nothing, and the
        next starts over: between two, a cancel of the trio task waiting for this
        thread ends the wait with ``trio.Cancelled`` (the writer task's commits are
        shielded, never cancelled), and a close with ``STORE_CLOSED``. Once the lock
        timeout is over, a lock on a table is ``TABLE_LOCKED``: that fails the whole
        group once (split into sessions, each would wait out the timeout again). The
        sessions whose row is locked are refused ``SESSION_LOCKED``, and the rest of
        the group committed in one more attempt; a lock found nowhere is
        ``SESSION_LOCKED`` for the group, a failure to split.
        """
        refusals = list(results)

        def attempt() -> bool:
            results[:] = refusals  # an attempt that met a lock wrote nothing
            return ran_within_lock_timeout(lambda: self._commit_group(batches, results))

        if until_lock_free(
            attempt, timeout_ms=_WRITE_LOCK_TIMEOUT_MS, between=self._between_attempts
        ):
            return
        self._refuse_table_lock()
        if not self._refuse_locked_rows(batches, refusals) or not attempt():
            raise row_locked(None, _WRITE_LOCK_TIMEOUT_MS)

    def _refuse_table_lock(self) -> None:
        """Raise ``TABLE_LOCKED`` if another transaction locks a table a commit writes."""
        # ROW EXCLUSIVE: the mode a commit's UPDATE, INSERT and COPY take.
        tables = locked_tables(self._live_writer(), self._schema, "ROW EXCLUSIVE")
        if tables:
            raise table_locked("a group commit", tables, _WRITE_LOCK_TIMEOUT_MS)

    def _refuse_locked_rows(
        self, batches: Sequence[AppendBatch], refusals: list[StoreError | None]
    ) -> bool:
        """Refuse the batches whose session's row another transaction locks; whether any."""
        live = {batches[i].session_id: i for i, error in enumerate(refusals) if error is None}
        held: set[str] = set()
        if not ran_within_lock_timeout(
            lambda: held.update(self._tables.locked_rows(self._live_writer(), list(live)))
        ):
            return False  # a table lock taken meanwhile: the group fails whole
        for session_id in held:
            refusals[live[session_id]] = row_locked(session_id, _WRITE_LOCK_TIMEOUT_MS)
        return bool(held)

    def _between_attempts(self) -> None:
        """End a commit's wait for a lock once the store closes or its trio task is cancelled."""
        self._check_not_closing()
        check_cancelled()

    def _commit_group(
        self, batches: Sequence[AppendBatch], results: list[StoreError | None]
    ) -> None:
        """Write the group in one transaction, on a fresh connection if the idle one was dropped.

        A connection the server closed while idle (a restart, an idle timeout)
        is found broken only by its first statement. Nothing of the group was
        committed then, so it is written again once; a failure at COMMIT is
        never retried here (the commit may have happened).
        """
        refusals = list(results)
        conn = self._live_writer()
        try:
            self._tables.commit(conn, batches, results)
        except psycopg_module().OperationalError:
            if not conn.broken:
                raise
            results[:] = refusals
            self._tables.commit(self._live_writer(), batches, results)

    def _claim_all(
        self, batches: Sequence[AppendBatch], results: list[StoreError | None]
    ) -> set[str]:
        """Claim each batch's session, recording refusals; the ids whose lock was taken now."""
        self._claims.probe()
        taken: set[str] = set()
        try:
            for index, batch in enumerate(batches):
                try:
                    if self._claims.take(batch.session_id):
                        taken.add(batch.session_id)
                except StoreError as exc:
                    if exc.code == "TABLE_LOCKED":
                        raise  # every other session's claim would wait for it again
                    results[index] = claim_refusal(batch, exc)
        except BaseException:
            # Nothing of the group is written: the locks taken for it would hold sessions for nobody.
            self._release_all(taken)
            raise
        return taken

    def _release_all(self, session_ids: set[str]) -> None:
        for session_id in session_ids:
            self._claims.release(session_id)

    def _live_writer(self) -> psycopg.Connection[Any]:
        """The write connection: made on first use, remade if the server dropped it.

        Called under the write lock, which :meth:`open` and :meth:`close` hold too."""
        if self._closed:
            raise not_open()
        conn = self._writer
        if conn is None or conn.broken or conn.closed:
            if conn is not None:
                conn.close()
            self._writer = conn = self._connect_writer()
        return conn

    def _connect_writer(self) -> psycopg.Connection[Any]:
        """A write connection whose statements give up on a lock held elsewhere within an attempt.

        Without the timeout a commit blocked by another transaction holds the
        write lock for as long as that transaction lasts, and close with it;
        a commit tries again until its own lock timeout is over.
        Its transactions read committed whatever the database's default: a
        commit checks, under its row locks, what other writers have committed."""
        conn = self._connect(autocommit=False, endable=True)
        conn.isolation_level = psycopg_module().IsolationLevel.READ_COMMITTED
        try:
            conn.execute(f"SET lock_timeout = '{_LOCK_ATTEMPT_MS}ms'")
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    # -- claims ---------------------------------------------------------------

    def claim(self, session_id: str) -> None:
        """Take the session's advisory lock; ``SESSION_LOCKED`` if another connection holds it.

        An unstored session raises ``SESSION_NOT_FOUND`` without locking: its
        creator claims it as its first commit inserts the row, and a probe for
        the id must not make that commit fail. In a trio worker thread whose
        task is cancelled, the wait for the previous writer's last commit ends
        soon, with ``trio.Cancelled`` and no lock kept.
        """
        if not self._claims.holds(session_id) and not self.contains(session_id):
            raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
        with read_only_refused(f"claiming session {session_id!r}"):
            self._claims.claim(session_id)

    def claim_new(self, session_id: str) -> None:
        """:meth:`claim` of a session not stored yet, for its creator, whose first commit keeps
        it; ``SESSION_ALREADY_EXISTS`` if it is stored or locked by another connection."""
        with read_only_refused(f"claiming session {session_id!r}"):
            self._claims.claim_new(session_id, lambda: self.contains(session_id))

    def release(self, session_id: str) -> None:
        """Drop the session's advisory lock (a dropped connection already dropped it)."""
        self._claims.release(session_id)

    def end_statements_of(self, thread: int) -> None:
        """End what the claim (or load's read) *thread* runs waits on, its task cancelled: its
        reader's statement, else the lock connection's (every claim with it) if *thread* holds
        the claims lock for its claim."""
        if not self._pool.end_read_of(thread):
            self._claims.end_claim_of(thread)

    # -- reads ----------------------------------------------------------------

    def read(self, session_id: str) -> StoredLog | None:
        """The header and event lines of one session, in seq order.

        Raises ``CorruptSessionError`` for a segment missing or cut short. A lock on the
        tables held elsewhere is waited for in short attempts, so a load's deadline ends it."""
        rows = self._pool.run(
            lambda conn: in_lock_attempts(
                lambda: self._tables.read_rows(conn, session_id, lock_timeout_ms=_LOCK_ATTEMPT_MS),
                timeout_ms=_pgreaders._READ_LOCK_TIMEOUT_MS,
                between=lambda: self._pool.read_goes_on(conn),
            )
        )
        if rows is None:
            return None
        (header, next_seq), segments = rows
        check_next_seq(next_seq, session_id, "retinue_sessions.next_seq")
        records = segment_records(session_id, segments, next_seq, "\n")
        return StoredLog(parse_header(header, session_id), records)

    def listing(self) -> Listing:
        """Every stored session's header (corrupt ones are skipped, each with why)."""
        sql = self._sql("SELECT id, header, next_seq FROM {schema}.retinue_sessions")
        rows = self._pool.run(lambda conn: conn.execute(sql).fetchall())
        return parse_headers(rows, "retinue_sessions.next_seq")

    def contains(self, session_id: str) -> bool:
        """Whether a row for the session exists."""
        sql = self._sql("SELECT 1 FROM {schema}.retinue_sessions WHERE id = %s")
        row = self._pool.run(lambda conn: conn.execute(sql, (session_id,)).fetchone())
        return row is not None

    def close(self) -> None:
        """Close every connection (the server drops the advisory locks).

        A commit still running is cancelled first: it fails, keeping its events
        buffered, rather than holding up the close until the server answers; so
        is one still connecting. One the server leaves unanswered, cancel request
        and all, is ended by shutting its connections down: if its COMMIT was
        sent, it fails ``COMMIT_UNKNOWN``."""
        self._closing.set()
        if self._write_lock.locked() and self._writer is not None:
            cancel_soon(self._writer)
        with held_in_slices(self._write_lock, _CLOSE_WAIT_SECONDS, self._end_commit):
            self._claims.close()
            self._closed = True
            self._pool.close()
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def _end_commit(self) -> None:
        """End what a commit holding the write lock waits for: a statement on the write
        connection, or the claims lock, whose holder waits on the lock connection."""
        shut_down(self._writer)
        self._claims.end_statements()
