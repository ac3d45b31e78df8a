"""The PostgreSQL store's tables, their version, and its connections' basics."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from retinue._errors import StoreError

from ._common import WaitedOutError, check_cancelled

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SCHEMA_VERSION",
    "check_cancelled",
    "check_schema",
    "check_schema_in_attempts",
    "connect_cancellably",
    "connect_waited_out",
    "in_lock_attempts",
    "in_schema",
    "locked_tables",
    "migrate",
    "migrate_in_attempts",
    "not_open",
    "psycopg_module",
    "ran_within_lock_timeout",
    "read_only_refused",
    "require_open",
    "table_locked",
    "until_lock_free",
]

T = TypeVar("T")

SCHEMA_VERSION = 1
_DDL = (
    """CREATE TABLE IF NOT EXISTS {schema}.retinue_meta (
        key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {schema}.retinue_sessions (
        id TEXT PRIMARY KEY,
        header TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        next_seq BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {schema}.retinue_segments (
        session_id TEXT NOT NULL REFERENCES {schema}.retinue_sessions (id),
        first_seq BIGINT NOT NULL,
        count INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, first_seq))""",
)
_VERSION = "SELECT value FROM {schema}.retinue_meta WHERE key = 'schema_version'"
_ENCODINGS = frozenset({"UTF8", "SQL_ASCII"})
"""Server encodings that hold any Unicode text sent as UTF-8 (SQL_ASCII keeps the bytes as sent)."""


def in_schema(schema: str, sql: str) -> str:
    """*sql* with every ``{schema}`` replaced by the quoted schema name (checked by the backend)."""
    return sql.replace("{schema}", f'"{schema}"')


def migrate(conn: psycopg.Connection[Any], schema: str) -> None:
    """Create the tables in *schema* (under a lock) unless they exist, then check their version.

    Each statement waits for a lock (another store creating them) as long as *conn*'s
    lock_timeout; one that gives up rolls the whole transaction back."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('retinue-schema', 0))")
        # Read under the lock: tables another store is creating now count as existing.
        found = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".retinue_meta',)).fetchone()
        new = found is None or found[0] is None
        if new:
            _check_encoding(conn)
        conn.execute(in_schema(schema, "CREATE SCHEMA IF NOT EXISTS {schema}"))
        for statement in _DDL:
            conn.execute(in_schema(schema, statement))
        if new:
            # Only with the tables: tables without it are refused, not taken for this version's.
            conn.execute(
                in_schema(
                    schema,
                    "INSERT INTO {schema}.retinue_meta (key, value) VALUES ('schema_version', %s)",
                ),
                (str(SCHEMA_VERSION),),
            )
        row = conn.execute(in_schema(schema, _VERSION)).fetchone()
    _check_version(schema, row)


def check_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    """Check the version of the tables in *schema*, only reading; ``UNSUPPORTED_SCHEMA`` if none."""
    try:
        row = conn.execute(in_schema(schema, _VERSION)).fetchone()
    except psycopg_module().errors.UndefinedTable:
        raise StoreError(
            f"schema {schema!r} is not a retinue store (it holds no retinue tables)",
            code="UNSUPPORTED_SCHEMA",
        ) from None
    _check_version(schema, row)


def check_schema_in_attempts(
    conn: psycopg.Connection[Any], schema: str, *, timeout_ms: int, attempt_ms: int
) -> None:
    """:func:`check_schema`, waiting for a lock on ``retinue_meta`` held elsewhere in short
    attempts of *attempt_ms* each, for *timeout_ms* in all.

    One read waiting the whole timeout would hold an entry past a deadline, or a close,
    of the trio task waiting for this thread: between two attempts a cancel ends the wait
    with ``trio.Cancelled``. Waited out, it is ``TABLE_LOCKED`` naming the table and who
    holds the lock, as a read meeting it is; tried again at once, it would wait as long.
    """

    def attempt() -> None:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{attempt_ms}ms'")
            check_schema(conn, schema)

    if until_lock_free(
        lambda: ran_within_lock_timeout(attempt), timeout_ms=timeout_ms, between=check_cancelled
    ):
        return
    # ACCESS SHARE: the mode the read takes, which only an exclusive lock stops.
    tables = locked_tables(conn, schema, "ACCESS SHARE", _META_TABLES) or [
        f'"{schema}".retinue_meta'
    ]
    refusal = table_locked(f"reading the tables of schema {schema!r}", tables, timeout_ms)
    raise WaitedOutError(refusal.message, code=refusal.code)


def _check_encoding(conn: psycopg.Connection[Any]) -> None:
    """Refuse to create a store in a database whose encoding cannot hold every event's text.

    Checked only before the tables are created: an existing store is still read
    (converted to UTF-8)."""
    encoding = conn.info.parameter_status("server_encoding")
    if encoding not in _ENCODINGS:
        raise StoreError(
            f"database {conn.info.dbname!r} has encoding {encoding}, which cannot hold every "
            "event's text: the PostgreSQL store needs a UTF8 database",
            code="UNSUPPORTED_ENCODING",
        )


def _check_version(schema: str, row: tuple[str] | None) -> None:
    if row is None:
        raise StoreError(
            f"schema {schema!r} holds retinue tables but no schema version (retinue_meta has no "
            f"'schema_version' row); this retinue reads {SCHEMA_VERSION} and writes no "
            "version over tables it did not create",
            code="UNSUPPORTED_SCHEMA",
        )
    if row[0] != str(SCHEMA_VERSION):
        raise StoreError(
            f"schema {schema!r} has retinue schema version {row[0]}; "
            f"this retinue reads {SCHEMA_VERSION}",
            code="UNSUPPORTED_SCHEMA",
        )


_TABLES = ("retinue_sessions", "retinue_segments")
"""The tables every commit writes (retinue_meta is read only when the store opens)."""
_META_TABLES = ("retinue_meta",)


def locked_tables(
    conn: psycopg.Connection[Any], schema: str, mode: str, tables: tuple[str, ...] = _TABLES
) -> list[str]:
    """Which of *tables* another transaction locks, or waits to lock, against *mode*.

    Asked after a statement gave up on a lock: a table lock (a ``LOCK TABLE``,
    a migration's ``ALTER TABLE``) stops every session alike, a row lock one
    session. Each table is tried in a transaction of its own, without waiting.
    """
    found: list[str] = []
    for table in tables:
        name = f'"{schema}".{table}'
        try:
            with conn.transaction():
                conn.execute(f"LOCK TABLE {name} IN {mode} MODE NOWAIT")
        except psycopg_module().errors.LockNotAvailable:
            found.append(name + _holders(conn, name))
    return found


def _holders(conn: psycopg.Connection[Any], table: str) -> str:
    """The table locks other backends hold on *table*, as `` (Mode by pid N, ...)``."""
    # In a transaction of its own: on a write connection a bare statement would leave one
    # open, and the next commit's transaction would be only a savepoint inside it.
    with conn.transaction():
        rows = conn.execute(
            "SELECT mode, pid FROM pg_locks WHERE locktype = 'relation' AND granted "
            "AND relation = to_regclass(%s) AND pid <> pg_backend_pid() ORDER BY pid, mode",
            (table,),
        ).fetchall()
    held = [f"{mode} by pid {pid}" for mode, pid in rows if mode != "AccessShareLock"]
    return f" ({', '.join(held)})" if held else ""


def until_lock_free(
    attempt: Callable[[], bool],
    *,
    timeout_ms: int,
    between: Callable[[], None] | None = None,
) -> bool:
    """Whether *attempt* succeeded, called again until it does or *timeout_ms* is over.

    An attempt that meets a lock held elsewhere returns false, having waited a short
    lock timeout and rolled back whole. The server's wait heeds no trio cancel:
    *between*, if given, is called between two attempts and raises to end the wait
    (``trio.Cancelled`` for a cancelled task, ``STORE_CLOSED`` for a closing store)."""
    give_up = time.monotonic() + timeout_ms / 1000
    while not attempt():
        if time.monotonic() >= give_up:
            return False
        if between is not None:
            between()
    return True


def in_lock_attempts(
    statements: Callable[[], T],
    *,
    timeout_ms: int,
    between: Callable[[], None] = check_cancelled,
) -> T:
    """What *statements* return, run again while they give up on a lock held elsewhere
    (each attempt one transaction, rolled back whole), for *timeout_ms* in all; then the
    last ``LockNotAvailable`` is raised.

    The server's wait heeds no trio cancel: *between* is called between two attempts and
    raises to end the wait (by default a cancel of the trio task waiting for this thread,
    with ``trio.Cancelled``)."""
    give_up = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            return statements()
        except psycopg_module().errors.LockNotAvailable:
            if time.monotonic() >= give_up:
                raise
        between()


def ran_within_lock_timeout(statements: Callable[[], object]) -> bool:
    """Whether *statements* ran, none giving up on a lock held elsewhere (``LockNotAvailable``)."""
    try:
        statements()
    except psycopg_module().errors.LockNotAvailable:
        return False
    return True


def table_locked(what: str, tables: list[str], waited_ms: int) -> StoreError:
    """The refusal of a write or claim that a lock on the store's *tables* held up."""
    return StoreError(
        f"{what}: another transaction holds a lock on table {' and '.join(tables)} (a LOCK "
        f"TABLE, or a schema change under way), waited for {waited_ms / 1000:g} s; every "
        "session of the store meets it: retry once that transaction ends",
        code="TABLE_LOCKED",
    )


def psycopg_module() -> Any:
    """psycopg, imported on first use: ``import retinue`` must work without it."""
    try:
        import psycopg
    except ImportError as exc:
        raise StoreError(
            "PostgresStore needs psycopg 3: pip install 'retinue[postgres]'",
            code="MISSING_DEPENDENCY",
        ) from exc
    return psycopg


def not_open() -> StoreError:
    """The refusal of a call to a store not opened yet, or closed."""
    return StoreError("the PostgreSQL store is not open", code="STORE_CLOSED")


def require_open(conn: psycopg.Connection[Any] | None) -> psycopg.Connection[Any]:
    """*conn*, or ``STORE_CLOSED`` if the store has none (not opened yet, or closed)."""
    if conn is None:
        raise not_open()
    return conn


@contextlib.contextmanager
def read_only_refused(what: str, advice: str = "write through the primary") -> Iterator[None]:
    """Raise ``READ_ONLY`` naming *what* for a statement a read-only server refused.

    Every write then fails alike (a hot standby, or default_transaction_read_only
    set): one typed error for the whole store, not one storage error per session."""
    try:
        yield
    except psycopg_module().errors.ReadOnlySqlTransaction as exc:
        raise StoreError(
            f"{what}: the PostgreSQL server is in read-only mode (a hot standby, or "
            f"default_transaction_read_only is on) and refused: {exc.diag.message_primary}; "
            f"{advice}",
            code="READ_ONLY",
        ) from exc


@contextlib.contextmanager
def connect_waited_out() -> Iterator[None]:
    """Raise :class:`WaitedOutError` for a connect that waited out its connect timeout.

    No answer came within it (a server that accepted the connection and hangs, or a
    host that never answered, during a failover say): an open tried again at once (a
    draining close's) would most likely wait as long, to fail alike."""
    try:
        yield
    except psycopg_module().errors.ConnectionTimeout as exc:
        raise WaitedOutError(
            f"opening the store: no answer from the PostgreSQL server within the connect "
            f"timeout ({exc}): retry once it answers",
            code="STORAGE_ERROR",
        ) from exc


_CANCEL_POLL_SECONDS = 0.1
"""How often a worker thread waiting for a connection checks whether its task was cancelled."""


def connect_cancellably(
    connect: Callable[[], psycopg.Connection[Any]],
    give_up: Callable[[], None] = check_cancelled,
) -> psycopg.Connection[Any]:
    """``connect()``, given up once *give_up* raises: by default with ``trio.Cancelled``
    once the trio task of this worker thread is cancelled.

    A server that accepts the connection but never answers holds a connect for
    the whole connect timeout (130 s by default), past any deadline of the task
    waiting for it. The connect runs in a thread of its own: given up, it is
    left to end there, and the connection it makes then is closed.
    """
    lock = threading.Lock()
    made: list[psycopg.Connection[Any] | BaseException] = []
    wanted = [True]
    done = threading.Event()

    def run() -> None:
        try:
            result: psycopg.Connection[Any] | BaseException = connect()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            result = exc
        with lock:
            if not wanted[0]:
                if not isinstance(result, BaseException):
                    result.close()
                # A failure's traceback holds this frame, which holds the failure: a cycle
                # that would keep the failed attempt's socket open until the cyclic GC ran.
                del result
                return
            made.append(result)
            del result
        done.set()

    threading.Thread(target=run, name="retinue-postgres-connect", daemon=True).start()
    while not done.wait(_CANCEL_POLL_SECONDS):
        try:
            give_up()
        except BaseException:
            with lock:
                wanted[0] = False
                if made and not isinstance(made[0], BaseException):
                    made[0].close()
            raise
    found = made.pop()
    if isinstance(found, BaseException):
        try:
            raise found
        finally:
            del found  # this frame, which its traceback holds, lets it go
    return found


def migrate_in_attempts(writer: psycopg.Connection[Any], schema: str, *, timeout_ms: int) -> None:
    """Create or check the tables of *schema*, waiting for a lock held elsewhere in short attempts.

    Another store creating them holds a lock until it commits, and a lock on a
    table (a ``LOCK TABLE``) holds it as long: between two attempts, a cancel of
    the trio task waiting for this thread (a deadline, or the store's close) ends
    the wait with ``trio.Cancelled``. Each attempt rolls back whole.
    """
    if not until_lock_free(
        lambda: ran_within_lock_timeout(lambda: migrate(writer, schema)),
        timeout_ms=timeout_ms,
        between=check_cancelled,
    ):
        raise WaitedOutError(
            f"creating the tables of schema {schema!r}: another transaction holds "
            "the lock they are created under (another store creating them) or a lock on "
            f"them, waited for {timeout_ms / 1000:g} s: retry once it ends",
            code="STORAGE_ERROR",
        )
