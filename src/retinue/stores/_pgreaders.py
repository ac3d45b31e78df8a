"""PostgreSQL reader connections: pooled, each read on one, remade once if the server dropped it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, final

from ._pgschema import check_cancelled, locked_tables, not_open, psycopg_module, table_locked
from ._pgsocket import cancel_soon, shut_down

if TYPE_CHECKING:
    import psycopg

__all__ = ["ReaderPool"]

T = TypeVar("T")

_READ_LOCK_TIMEOUT_MS = 30_000
"""How long a read waits for a lock on a table held elsewhere: its worker thread, which no
trio deadline stops, would otherwise wait for as long as the other transaction lasts."""
IDLE_SECONDS = 30.0
"""How long the pool keeps a connection no read has used; it is closed past that.

A steady load keeps the connections it runs on at once, however many (at most one per worker
thread: trio runs 40), reconnecting for none of its reads; those a burst opened beyond it are
closed once unused this long, looked for every :data:`SHED_SECONDS` by a thread of the pool
(not by the reads, which would scan the pool each), so that a process gone quiet after a burst
holds none of the server's max_connections for them. Half a minute outlasts the pauses of a load that
comes and goes (a reconnect costs a few milliseconds, a TLS handshake more) and lets a quiet
process give the server its connections back soon."""
SHED_SECONDS = 1.0
"""How often the pool looks for connections past their idle age: on a thread of its own, which
waits on no other connection (the lock connection being made again may wait for the server)."""


@final
class ReaderPool:
    """Autocommit reader connections of a :class:`~retinue.stores.PostgresStore`, pooled.

    Closed until :meth:`open`: a read then refuses to start, and a read still
    in flight on :meth:`close` is cancelled in the server and closes its
    connection instead of pooling it. *connect* makes a new autocommit connection.
    An idle connection is kept for :data:`IDLE_SECONDS`; *clock* tells the time.
    """

    def __init__(
        self,
        schema: str,
        connect: Callable[[], psycopg.Connection[Any]],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._schema = schema
        self._connect = connect
        self._clock = clock
        self.readers: list[psycopg.Connection[Any]] = []
        """Idle connections, the last used last: those a steady load does not reach age first."""
        self._idle_since: dict[psycopg.Connection[Any], float] = {}
        self._busy: dict[psycopg.Connection[Any], int] = {}
        """Connections a read runs on now, each with how many closes ran before it was taken."""
        self._reading: dict[int, psycopg.Connection[Any]] = {}
        """The connection of each read under way, by the id of its thread: see :meth:`end_read_of`."""
        self._lock = threading.Lock()
        self.closed = True
        self._closes = 0
        """How many times :meth:`close` ran: a read under way across one was sent its cancel,
        which may land after a reopen, on whatever statement its connection runs then."""
        self._stop_shedding = threading.Event()
        self._shedder: threading.Thread | None = None

    def open(self, first: psycopg.Connection[Any] | None = None) -> None:
        """Let reads start, *first* (a connection made by :meth:`connect`) pooled already."""
        with self._lock:
            if first is not None:
                self._pool(first)
            self.closed = False
        if self._shedder is not None:
            return  # opened already
        stop = self._stop_shedding = threading.Event()
        # Joined by close: it lives as long as the connections it sheds.
        self._shedder = threading.Thread(
            target=self._shed, args=(stop,), name="retinue-postgres-readers", daemon=True
        )
        self._shedder.start()

    def _shed(self, stop: threading.Event) -> None:
        """Shed the idle connections past their age every :data:`SHED_SECONDS`, until *stop*:
        a process gone quiet after a burst of reads takes and gives back none."""
        while not stop.wait(SHED_SECONDS):
            self.shed_idle()

    def close(self) -> None:
        """Close every idle connection, cancel the reads under way; refuse reads until :meth:`open`.

        A read waiting on a lock held elsewhere would otherwise wait out the lock
        timeout, and whatever waits for it (a load holding the store's commit lock)
        with it: cancelled, it fails ``STORE_CLOSED``, as a read after the close does.
        """
        with self._lock:
            self.closed = True
            self._closes += 1
            for conn in self.readers:
                conn.close()
            self.readers.clear()
            self._idle_since.clear()
            busy = list(self._busy)
        self._stop_shedding.set()
        shedder, self._shedder = self._shedder, None
        if shedder is not None:
            shedder.join()
        for conn in busy:
            cancel_soon(conn)

    def read_goes_on(self, conn: psycopg.Connection[Any]) -> None:
        """Raise to end a read on *conn* between two lock attempts once its task is
        cancelled (``trio.Cancelled``) or the pool has closed since *conn* was taken
        (``STORE_CLOSED``): the close's cancel request reaches only a statement under
        way, not the pause between two."""
        check_cancelled()
        # Closed since the read began, though opened again: its cancel request missed it.
        if self.closed or self._busy.get(conn) != self._closes:
            raise not_open()

    def run(self, read: Callable[[psycopg.Connection[Any]], T]) -> T:
        """*read* run on a pooled reader connection (made if none is idle), which it pools again.

        A pooled connection the server closed meanwhile (a restart, an idle
        timeout) is found broken only by its first statement. A read changes
        nothing, so it runs again, once, on a new connection, as a write does.
        """
        conn, pooled, closes = self._take()
        try:
            try:
                result = self._read_on(conn, read)
            except psycopg_module().OperationalError:
                # Cut by a close (though opened again since), it is not tried again.
                if not pooled or not conn.broken or self._closes != closes:
                    raise
                self._let_go(conn)
                conn, _, closes = self._take(fresh=True)
                result = self._read_on(conn, read)
        except psycopg_module().Error as exc:
            self._let_go(conn)
            if self._closes != closes:
                raise not_open() from exc  # cancelled by a close, or cut by it
            raise
        except BaseException:
            self._let_go(conn)
            raise
        with self._lock:
            self._busy.pop(conn, None)
            self._reading.pop(threading.get_ident(), None)
            kept = self._closes == closes
            if kept:
                self._pool(conn)
        # A read still in flight on a close closes its connection instead of pooling it,
        # even once the pool is open again: the close's cancel may still be on its way.
        if not kept:
            conn.close()
        return result

    def end_read_of(self, thread: int) -> bool:
        """Shut down the connection the read run by *thread* is on, if any (whether one is): a
        statement the server leaves unanswered holds a read whose task was cancelled for good."""
        with self._lock:
            conn = self._reading.get(thread)
        shut_down(conn)
        return conn is not None

    def _pool(self, conn: psycopg.Connection[Any]) -> None:
        """Make *conn* idle from now; under the pool's lock."""
        self.readers.append(conn)
        self._idle_since[conn] = self._clock()

    def shed_idle(self) -> None:
        """Close the idle connections no read has used for :data:`IDLE_SECONDS`."""
        with self._lock:
            oldest = self._clock() - IDLE_SECONDS
            stale = [conn for conn in self.readers if self._idle_since[conn] < oldest]
            for conn in stale:
                self.readers.remove(conn)
                del self._idle_since[conn]
        for conn in stale:
            conn.close()

    def _read_on(
        self, conn: psycopg.Connection[Any], read: Callable[[psycopg.Connection[Any]], T]
    ) -> T:
        """*read* run on *conn*; a lock on a table held elsewhere waited out is ``TABLE_LOCKED``."""
        try:
            return read(conn)
        except psycopg_module().errors.LockNotAvailable as exc:
            # ACCESS SHARE: the mode a read takes, which only an exclusive lock stops.
            tables = locked_tables(conn, self._schema, "ACCESS SHARE")
            if tables:
                raise table_locked("a read", tables, _READ_LOCK_TIMEOUT_MS) from exc
            raise

    def _take(self, *, fresh: bool = False) -> tuple[psycopg.Connection[Any], bool, int]:
        """An idle pooled reader connection (unless *fresh*) or a new one, whether it was
        pooled, and how many closes ran before it was taken.

        Noted as busy until the read is over: a close cancels it meanwhile."""
        with self._lock:
            if self.closed:
                raise not_open()
            if self.readers and not fresh:
                conn = self.readers.pop()
                del self._idle_since[conn]
                self._busy[conn] = self._closes
                self._reading[threading.get_ident()] = conn
                return conn, True, self._closes
        conn = self.connect()
        with self._lock:
            if self.closed:
                # Closed while this one was made: the close could not cancel it.
                conn.close()
                raise not_open()
            # Reopened meanwhile, it is still no close's to cancel: it counts from now.
            self._busy[conn] = self._closes
            self._reading[threading.get_ident()] = conn
            return conn, False, self._closes

    def _let_go(self, conn: psycopg.Connection[Any]) -> None:
        """Close *conn*, a read's connection that is not pooled again."""
        with self._lock:
            self._busy.pop(conn, None)
            self._reading.pop(threading.get_ident(), None)
        conn.close()

    def connect(self) -> psycopg.Connection[Any]:
        """A reader connection whose statements give up on a table lock held elsewhere."""
        conn = self._connect()
        try:
            conn.execute(f"SET lock_timeout = '{_READ_LOCK_TIMEOUT_MS}ms'")
        except BaseException:
            conn.close()
            raise
        return conn
