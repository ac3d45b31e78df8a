"""A claim's handover: the wait for the previous writer's commit still in flight.

A killed process's lock connection can end before its write connection has
finished a commit already sent: the session's advisory lock is free, its log not
yet final. That commit holds the session's row lock until it is done, which a
claim waits for here, on a pooled reader connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

from retinue._errors import StoreError

from ._pgrefusals import locked
from ._pgschema import (
    check_cancelled,
    in_schema,
    locked_tables,
    psycopg_module,
    table_locked,
    until_lock_free,
)

if TYPE_CHECKING:
    import psycopg

    from ._pgreaders import ReaderPool

__all__ = ["HANDOVER_SLICE_MS", "Handover"]

_HANDOVER = "SELECT 1 FROM {schema}.retinue_sessions WHERE id = %s FOR SHARE"
_HANDOVER_TIMEOUT_MS = 10_000
"""How long a claim waits for the previous writer's last commit before giving up."""
HANDOVER_SLICE_MS = 100
"""How long each statement of that wait lasts: between two, a cancelled load or flush gives up."""


@final
class Handover:
    """The handover wait of the sessions of one schema, on readers of *pool*."""

    def __init__(self, schema: str, pool: ReaderPool) -> None:
        self._schema = schema
        self._pool = pool
        self._sql = in_schema(schema, _HANDOVER)

    def wait(self, session_id: str) -> None:
        """Wait until the session's previous writer has no commit in flight.

        Waited for in short statements, each on a pooled reader it leaves idle, so
        that a cancelled load or flush can stop between two, and closing the store
        ends the wait (the writer task's too, which is never cancelled) with
        ``STORE_CLOSED``. Each statement is woken as that commit ends: the slices
        bound only how long a cancel waits.

        Raises:
            StoreError: the commit's locks were not free in time: ``TABLE_LOCKED``
                naming a table locked, else ``SESSION_LOCKED``.
        """
        if not until_lock_free(
            lambda: self._pool.run(lambda conn: self._handed_over(conn, session_id)),
            timeout_ms=_HANDOVER_TIMEOUT_MS,
            between=check_cancelled,
        ):
            raise self._not_handed_over(session_id)

    def _not_handed_over(self, session_id: str) -> StoreError:
        """Why the handover of *session_id* was not seen: a table lock, else its row's."""
        # ROW SHARE: the mode the handover's FOR SHARE takes.
        tables = self._pool.run(lambda conn: locked_tables(conn, self._schema, "ROW SHARE"))
        if tables:
            return table_locked(f"claiming session {session_id!r}", tables, _HANDOVER_TIMEOUT_MS)
        return locked(session_id)

    def _handed_over(self, conn: psycopg.Connection[Any], session_id: str) -> bool:
        """Whether the row lock of a commit in flight came free within a slice; only waits."""
        with conn.transaction():
            # Whatever the database's default: under a snapshot, the row of a commit that
            # ended while this waited would be refused as a serialization failure.
            conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            conn.execute(f"SET LOCAL lock_timeout = '{HANDOVER_SLICE_MS}ms'")
            try:
                conn.execute(self._sql, (session_id,))
            except psycopg_module().errors.LockNotAvailable:
                return False
        return True
