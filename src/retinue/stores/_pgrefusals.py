"""The refusals of PostgreSQL session claims (a session locked elsewhere, a claim lost, a lock
table full) and the failure of a commit whose outcome is unknown."""

from __future__ import annotations

from collections.abc import Sequence

from retinue._errors import ConfigError, StoreError

from ._backend import AppendBatch
from ._common import already_exists
from ._pgschema import psycopg_module
from ._records import failed

__all__ = [
    "check_dsn",
    "claim_lost",
    "claim_refusal",
    "commit_unknown",
    "lock_table_full",
    "locked",
    "out_of_locks",
    "row_locked",
    "unknown_outcomes",
]


def _masked(fault: str) -> str:
    """*fault* with all it quotes of the DSN written ``"***"``: from the first quote that
    opens no one-character token of libpq's own (as in ``missing "="``) to the last quote,
    or to the end. A fragment of a DSN may hold quotes itself, and part of a password."""
    start = 0
    while (first := fault.find('"', start)) != -1:
        if fault[first + 2 : first + 3] == '"':
            start = first + 3
            continue
        last = fault.rfind('"')
        return fault[:first] + '"***"' + ("" if last == first else fault[last + 1 :])
    return fault


def check_dsn(dsn: str) -> None:
    """Refuse a *dsn* libpq cannot parse, when the store is made rather than at its open.

    The refusal quotes no fragment of the DSN, written ``***`` as a password is:
    libpq's parse errors quote the piece they stopped at, which may be part of
    one. Without psycopg
    nothing is checked; the open says it is missing.

    Raises:
        ConfigError: ``INVALID_STORE_PATH``, naming the PostgreSQL store and the fault.
    """
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return
    try:
        conninfo_to_dict(dsn)
    except UnicodeError:
        raise ConfigError(
            "PostgresStore dsn holds what UTF-8 cannot encode (a stray byte, say), "
            "which libpq cannot take",
            code="INVALID_STORE_PATH",
        ) from None
    except psycopg_module().ProgrammingError as exc:
        raise ConfigError(
            f"PostgresStore dsn is no libpq connection string or URI: {_masked(str(exc)).strip()}",
            code="INVALID_STORE_PATH",
        ) from None


def locked(session_id: str) -> StoreError:
    """The refusal of a session whose writer lock another connection holds."""
    return StoreError(
        f"session {session_id!r} is being written by another process", code="SESSION_LOCKED"
    )


class _ClaimLostError(StoreError):
    """A session's claim lost with the lock connection: never a duplicate create's refusal."""


def claim_lost(session_id: str, *, taken: bool) -> StoreError:
    """The refusal of a write of a session whose claim went with a dropped lock connection;
    *taken*: another connection has claimed it since."""
    lost = (
        f"session {session_id!r}: its claim went with this store's lock connection, which the "
        "PostgreSQL server ended (a restart, pg_terminate_backend, an idle timeout)"
    )
    if taken:
        return _ClaimLostError(
            f"{lost}, and another process claimed the session before it was retaken: it is "
            "being written by another process, and this store writes none of it from now on",
            code="SESSION_LOCKED",
        )
    return _ClaimLostError(
        f"{lost} during this commit: nothing of it written; its next write claims it again",
        code="SESSION_LOCKED",
    )


def row_locked(session_id: str | None, waited_ms: int) -> StoreError:
    """The refusal of a session whose row another transaction held through a commit's lock
    timeout; without *session_id*, of a group that waited it out with no lock on a table or
    row found."""
    named, whose = (
        ("", "a session's") if session_id is None else (f"session {session_id!r}: ", "its")
    )
    return StoreError(
        f"{named}another transaction holds {whose} row locked (a commit of another writer "
        "still under way, or a hand-run UPDATE, DELETE or SELECT ... FOR UPDATE or FOR SHARE; "
        "not an insert referring to it by a foreign key), waited for "
        f"{waited_ms / 1000:g} s: retry once that transaction ends",
        code="SESSION_LOCKED",
    )


def claim_refusal(batch: AppendBatch, exc: StoreError) -> StoreError:
    """Why *batch* is refused when claiming its session raised *exc*.

    The lock of an id held elsewhere means it is stored or being created: a
    create of it is a duplicate, as the other stores call it, whichever commits first."""
    if batch.header is not None and exc.code == "SESSION_LOCKED" and type(exc) is StoreError:
        return already_exists(batch.session_id)
    return exc


def out_of_locks(exc: BaseException) -> bool:
    """Whether *exc* is the server's lock table running full (its hint names the setting)."""
    psycopg = psycopg_module()
    if not isinstance(exc, psycopg.errors.OutOfMemory):
        return False
    return "max_locks_per_transaction" in (exc.diag.message_hint or str(exc))


def lock_table_full(what: str) -> StoreError:
    """The refusal of a claim or write once the server's shared lock table is full."""
    return StoreError(
        f"{what}: the PostgreSQL server's lock table is full (out of shared memory). "
        "PostgresStore holds one advisory lock per attached session, in a table of "
        "max_locks_per_transaction x (max_connections + max_prepared_transactions) entries "
        "that every client of the server shares: detach sessions, or raise "
        "max_locks_per_transaction (a server restart applies it)",
        code="LOCK_TABLE_FULL",
    )


def commit_unknown(exc: BaseException) -> StoreError:
    """The failure of a group commit whose connection was lost once its COMMIT may have been
    sent: the server may have committed it whole, or nothing of it, and did not say which."""
    return StoreError(
        f"the connection to the PostgreSQL server was lost with the commit sent ({exc}): "
        "whether it was committed is unknown (all of it or none); its events stay buffered, "
        "and the next flush writes those the commit did not store",
        code="COMMIT_UNKNOWN",
    )


def unknown_outcomes(
    batches: Sequence[AppendBatch], results: list[StoreError | None], unknown: StoreError
) -> list[StoreError | None]:
    """The answers to a group whose commit's outcome is *unknown*: its refusals, and that for
    every other batch. Answered, not raised: a group that raised is written again one batch at
    a time, its flushes answered by those writes, not by what befell this one."""
    return [
        error or failed([batch], unknown)[0] for batch, error in zip(batches, results, strict=True)
    ]
