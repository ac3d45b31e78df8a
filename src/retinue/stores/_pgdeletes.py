"""Deletes of the PostgreSQL store: a session's rows, in one transaction of the write connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retinue._errors import StoreError

from ._pgrefusals import row_locked
from ._pgschema import psycopg_module, ran_within_lock_timeout, read_only_refused, until_lock_free
from ._pgsql import SessionTables

if TYPE_CHECKING:
    import psycopg

__all__ = ["TableDeletes"]

_DELETE_LOCK_TIMEOUT_MS = 30_000
"""How long a delete waits for a lock held elsewhere on its rows or tables, as a commit does."""


class TableDeletes:
    """The delete of :class:`~retinue.stores._postgres.PostgresBackend`, over its write connection.

    Run under the write lock, as a group commit is: the write connection runs
    one transaction at a time.
    """

    _write_lock: threading.Lock
    _tables: SessionTables
    _live_writer: Callable[[], psycopg.Connection[Any]]
    _between_attempts: Callable[[], None]

    def delete(self, session_id: str) -> None:
        """Delete the session's rows in one transaction; ``SESSION_NOT_FOUND`` if it has none.

        Its caller holds its claim. A lock held elsewhere on its row or the tables is
        waited for in short attempts (a cancel or a close ends the wait), then refused
        ``SESSION_LOCKED``; nothing is deleted unless the transaction commits."""
        with read_only_refused(f"deleting session {session_id!r}"), self._write_lock:
            if not until_lock_free(
                lambda: ran_within_lock_timeout(lambda: self._delete_once(session_id)),
                timeout_ms=_DELETE_LOCK_TIMEOUT_MS,
                between=self._between_attempts,
            ):
                raise row_locked(session_id, _DELETE_LOCK_TIMEOUT_MS)

    def _delete_once(self, session_id: str) -> None:
        """Delete on the write connection, once more on a fresh one if that one was dropped.

        A connection the server closed while idle is found broken only by its first
        statement, which then committed nothing. One lost at its COMMIT may have
        committed: the session found gone then is gone by that commit, as the caller's
        claim keeps every other delete of it out."""
        conn = self._live_writer()
        try:
            self._tables.delete(conn, session_id)
        except psycopg_module().OperationalError:
            if not conn.broken:
                raise
            try:
                self._tables.delete(self._live_writer(), session_id)
            except StoreError as exc:
                if exc.code != "SESSION_NOT_FOUND":
                    raise
