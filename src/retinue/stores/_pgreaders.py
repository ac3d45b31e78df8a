"""PostgreSQL reader connections: pooled, each read on one, remade once if the server dropped it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, final

from ._pgschema import locked_tables, not_open, psycopg_module, table_locked

if TYPE_CHECKING:
    import psycopg

__all__ = ["ReaderPool"]

T = TypeVar("T")

_READ_LOCK_TIMEOUT_MS = 30_000
"""How long a read waits for a lock on a table held elsewhere: its worker thread, which no
trio deadline stops, would otherwise wait for as long as the other transaction lasts."""


@final
class ReaderPool:
    """Autocommit reader connections of a :class:`~retinue.stores.PostgresStore`, pooled.

    Closed until :meth:`open`: a read then refuses to start, and a read still
    in flight on :meth:`close` closes its connection instead of pooling it.
    *connect* makes a new autocommit connection.
    """

    def __init__(self, schema: str, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._schema = schema
        self._connect = connect
        self.readers: list[psycopg.Connection[Any]] = []
        """Idle connections, the last made or used first."""
        self._lock = threading.Lock()
        self.closed = True

    def open(self, first: psycopg.Connection[Any] | None = None) -> None:
        """Let reads start, *first* (a connection made by :meth:`connect`) pooled already."""
        with self._lock:
            if first is not None:
                self.readers.append(first)
            self.closed = False

    def close(self) -> None:
        """Close every idle connection; refuse reads until :meth:`open`."""
        with self._lock:
            self.closed = True
            for conn in self.readers:
                conn.close()
            self.readers.clear()

    def run(self, read: Callable[[psycopg.Connection[Any]], T]) -> T:
        """*read* run on a pooled reader connection (made if none is idle), which it pools again.

        A pooled connection the server closed meanwhile (a restart, an idle
        timeout) is found broken only by its first statement. A read changes
        nothing, so it runs again, once, on a new connection, as a write does.
        """
        conn, pooled = self._take()
        try:
            try:
                result = read(conn)
            except psycopg_module().errors.LockNotAvailable as exc:
                # ACCESS SHARE: the mode a read takes, which only an exclusive lock stops.
                tables = locked_tables(conn, self._schema, "ACCESS SHARE")
                if tables:
                    raise table_locked("a read", tables, _READ_LOCK_TIMEOUT_MS) from exc
                raise
            except psycopg_module().OperationalError:
                if not pooled or not conn.broken:
                    raise
                conn.close()
                conn, _ = self._take(fresh=True)
                result = read(conn)
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if not self.closed:
                self.readers.append(conn)
                return result
        # A read still in flight on close closes its connection instead of pooling it.
        conn.close()
        return result

    def _take(self, *, fresh: bool = False) -> tuple[psycopg.Connection[Any], bool]:
        """An idle pooled reader connection (unless *fresh*) or a new one; whether it was pooled."""
        with self._lock:
            if self.closed:
                raise not_open()
            if self.readers and not fresh:
                return self.readers.pop(), True
        return self.connect(), False

    def connect(self) -> psycopg.Connection[Any]:
        """A reader connection whose statements give up on a table lock held elsewhere."""
        conn = self._connect()
        try:
            conn.execute(f"SET lock_timeout = '{_READ_LOCK_TIMEOUT_MS}ms'")
        except BaseException:
            conn.close()
            raise
        return conn
