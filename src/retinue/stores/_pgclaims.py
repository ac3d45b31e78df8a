"""PostgreSQL session claims: one writer per session, by advisory locks on one connection."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, final

from retinue._errors import StoreError

from ._common import claim_new_id
from ._pghandover import HANDOVER_SLICE_MS, Handover
from ._pglocker import Backend, end_backend, keepalives, set_up_locker
from ._pgrefusals import claim_lost, lock_table_full, locked, out_of_locks
from ._pgschema import (
    check_cancelled,
    not_open,
    psycopg_module,
    require_open,
)
from ._pgsocket import held_in_slices, readable, shut_down, shut_down_after

if TYPE_CHECKING:
    import psycopg

    from ._pgreaders import ReaderPool

__all__ = ["SessionClaims"]

_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 7))"
_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 7))"
_CLOSE_WAIT_SECONDS = 1.0
"""How long a close waits for the claims lock before it ends the statement its holder waits for."""
_UNLOCK_SECONDS = 2.0
"""How long a close waits for the server to give the locks back before ending the connection."""
_WATCH_SECONDS = 1.0
"""How often the idle lock connection is looked at for a drop: until its claims are retaken,
another process may take them."""

T = TypeVar("T")


@final
class SessionClaims:
    """The advisory lock of every session this store writes, held on one lock connection.

    Released by :meth:`release` (or by the server when the connection ends).
    A claim also waits for a commit the previous writer still has in flight,
    so that a load reads the final log. That wait runs on a reader connection,
    not holding the lock connection: it holds up the claims and releases of
    its own session only, and a commit group only if the group holds that
    session (the store commits one group at a time, so later groups then
    wait behind it). Every method blocks.
    """

    def __init__(
        self,
        schema: str,
        dsn: str,
        connect: Callable[..., psycopg.Connection[Any]],
        pool: ReaderPool,
    ) -> None:
        self._schema = schema
        self._dsn = dsn
        self._connect = connect
        """Makes a connection, given up once its ``give_up`` keyword raises."""
        self._handover = Handover(schema, pool)
        self._locker: psycopg.Connection[Any] | None = None
        self._opened = False
        """Between open and close; the lock connection may not be made yet (first claim)."""
        self._locker_backend: Backend | None = None
        """The lock connection's backend."""
        self._locker_lock = threading.Lock()
        self._claimer: int | None = None
        """The thread holding the claims lock for a claim, if one does."""
        self._settled = threading.Condition(self._locker_lock)
        """Notified when a claim's handover ends, with or without the lock."""
        self._claimed: set[str] = set()
        self._lost: set[str] = set()
        """Sessions claimed whose lock went with a dropped lock connection and was found taken."""
        self._pending: set[str] = set()
        """Sessions locked whose handover is still being awaited."""
        self._stop_watching = threading.Event()
        self._watcher: threading.Thread | None = None
        self._connecting_lock = threading.Lock()
        self._connecting: set[psycopg.Connection[Any]] = set()
        """New lock connections being set up, until made the lock connection or closed."""

    def open(self, *, connect: bool = True) -> None:
        """Take claims from now on, on a lock connection made now or, unless *connect*, by the
        first claim: a store that only reads then holds none."""
        stop = self._stop_watching = threading.Event()
        made = self._new_locker() if connect else (None, None)
        with self._locker_lock:
            self._locker, self._locker_backend = made
            self._opened = True
        # Joined by close: it lives as long as the connections it watches.
        self._watcher = threading.Thread(
            target=self._watch, args=(stop,), name="retinue-postgres-claims", daemon=True
        )
        self._watcher.start()

    def close(self) -> None:
        """Give up every lock and close the lock connection; a pending claim then fails.
        Within seconds, whatever the server does: a statement it leaves unanswered is ended."""
        # Set first: a watcher connecting without the lock gives up, and takes it no more.
        self._stop_watching.set()
        self._shut_down_connecting()
        with self._held_for_close():
            self._opened = False
            conn = self._locker
            if conn is not None:
                if self._claimed and not (conn.broken or conn.closed):
                    # The server drops a closed connection's locks only as its backend
                    # exits, after the close returns: a claim made right after it would
                    # still find the session locked. Unanswered, the unlock is ended by
                    # shutting the connection down: the server drops them as it sees the end.
                    with (
                        contextlib.suppress(psycopg_module().Error),
                        shut_down_after(conn, _UNLOCK_SECONDS),
                    ):
                        conn.execute("SELECT pg_advisory_unlock_all()")
                conn.close()
            self._locker = None
            self._claimed.clear()
            self._lost.clear()
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.join()

    def _shut_down_connecting(self) -> None:
        """End the statements of the lock connections being set up, which close would wait for."""
        with self._connecting_lock:
            for connecting in self._connecting:
                shut_down(connecting)

    def _held_for_close(self) -> contextlib.AbstractContextManager[None]:
        """The claims lock, taken from a holder that waits for a server that does not answer
        (TCP keepalives see nothing wrong while the network acknowledges what is sent): none
        waits for a lock under it, so one held past a moment is ended by shutting the lock
        connections down. The claims go too: the server drops the advisory locks of a
        connection as it sees its end."""
        return held_in_slices(self._locker_lock, _CLOSE_WAIT_SECONDS, self.end_statements)

    def end_statements(self) -> None:
        """End the statements of the lock connections (and the claims with them): a server
        that does not answer would hold whoever waits for them, the claims lock held."""
        self._shut_down_connecting()
        locker = self._locker
        if locker is not None:
            shut_down(locker)

    def end_claim_of(self, thread: int) -> None:
        """:meth:`end_statements` if *thread* holds the claims lock for a claim (one waiting
        for it gives up by itself): it waits on the lock connection, for a server that may
        never answer. Held by another thread, the lock connection is kept: ending it would
        drop every claim of the store for a claim that waits on none of it."""
        if self._claimer == thread:
            self.end_statements()

    @contextlib.contextmanager
    def _held_unless_cancelled(self) -> Iterator[None]:
        """The claims lock, given up with ``trio.Cancelled`` once the trio task of this worker
        thread is cancelled: its holder may wait for a server that does not answer. The
        holder is known meanwhile (:meth:`end_claim_of`)."""
        with held_in_slices(self._locker_lock, HANDOVER_SLICE_MS / 1000, check_cancelled):
            self._claimer = threading.get_ident()
            try:
                yield
            finally:
                self._claimer = None

    def _lock_key(self, session_id: str) -> str:
        """The text hashed into the session's advisory lock key.

        Advisory locks are per database: the schema keeps stores in different
        schemas from locking each other's sessions (a schema name has no '.')."""
        return f"{self._schema}.{session_id}"

    def _connect_locker(self, give_up: Callable[[], None] | None = None) -> psycopg.Connection[Any]:
        """A new lock connection, given up once *give_up* raises, with TCP keepalives."""
        return self._connect(give_up=give_up, endable=True, **keepalives(self._dsn))

    def _new_locker(self) -> tuple[psycopg.Connection[Any], Backend | None]:
        """A new lock connection, set up, and its backend."""
        conn = self._connect_locker()
        try:
            with self._ended_by_close(conn, self._stop_watching):
                return conn, set_up_locker(conn)
        except BaseException:
            conn.close()
            raise

    def holds(self, session_id: str) -> bool:
        """Whether this store has claimed the session."""
        return session_id in self._claimed

    def claim(self, session_id: str) -> None:
        """Take the session's advisory lock; ``SESSION_LOCKED`` if another connection holds it.

        Run by a trio worker thread (a load), it raises ``trio.Cancelled`` soon
        after its task is cancelled, giving the lock up, rather than wait on."""
        self.probe()
        self.take(session_id)

    def claim_new(self, session_id: str, stored: Callable[[], bool]) -> None:
        """Take the lock of a session not stored yet, for its creator: ``SESSION_ALREADY_EXISTS``
        if another connection holds it or *stored* finds it stored once it is taken."""
        self.probe()
        claim_new_id(
            session_id, lambda: self.take(session_id), lambda: self.release(session_id), stored
        )

    def take(self, session_id: str) -> bool:
        """Claim the session; whether this call took the lock (false: it was held already).

        A wait gives up when the trio task that runs this worker thread is
        cancelled: a load, or a flush committing on its own, whose group has
        sent nothing yet. The writer task's commits are shielded, never cancelled."""
        while True:
            conn = self._lock_for_handover(session_id)
            if conn is None:
                return False
            try:
                self._handover.wait(session_id)
            except BaseException:
                self._settle(session_id, conn, keep=False)
                raise
            if self._settle(session_id, conn, keep=True):
                return True
            # The lock went with its connection during the wait: take it again.

    def _lock_for_handover(self, session_id: str) -> psycopg.Connection[Any] | None:
        """Take the lock, marking the session pending; ``None`` if it is claimed already."""
        with self._held_unless_cancelled():
            # Advisory locks stack: a second claim of a session waits for the first.
            while session_id in self._pending:
                self._settled.wait(HANDOVER_SLICE_MS / 1000)
                check_cancelled()
                self._claimer = threading.get_ident()  # the lock was another's meanwhile
            # A session claimed (or retaken on reconnect) is not locked again.
            conn = self._live_locker()
            if session_id in self._claimed:
                return None
            if not self._try_lock(conn, session_id):
                if session_id in self._lost:
                    raise claim_lost(session_id, taken=True)
                raise locked(session_id)
            self._pending.add(session_id)
            return conn

    def _settle(self, session_id: str, conn: psycopg.Connection[Any], *, keep: bool) -> bool:
        """End a pending claim: keep its lock or give it up. False if the lock was lost meanwhile.

        A lock taken on a connection that has since broken, been replaced or
        been closed is gone; the handover awaited under it proves nothing now."""
        with self._locker_lock:
            self._pending.discard(session_id)
            self._settled.notify_all()
            if conn is not self._locker or conn.broken or conn.closed:
                return False
            if keep:
                self._claimed.add(session_id)
                self._lost.discard(session_id)
            else:
                with contextlib.suppress(psycopg_module().OperationalError):
                    conn.execute(_UNLOCK, (self._lock_key(session_id),))
            return True

    def probe(self) -> None:
        """Notice a lock connection the server dropped (its locks are gone) before writing."""
        with self._held_unless_cancelled():
            conn = self._live_locker()
            with contextlib.suppress(psycopg_module().OperationalError):
                conn.execute("SELECT 1")
            self._live_locker()

    def _live_locker(self) -> psycopg.Connection[Any]:
        """The lock connection, made if there is none yet or the server dropped it."""
        if not self._opened:
            raise not_open()
        conn = self._locker
        if conn is not None and not (conn.broken or conn.closed):
            return conn
        conn, backend = self._new_locker()
        self._replace_locker(conn, backend)
        return conn

    def _replace_locker(self, conn: psycopg.Connection[Any], backend: Backend | None) -> None:
        """Make *conn* the lock connection, in place of a dropped one whose claims it retakes.

        It ends the dropped one's backend if that still runs, then retakes the
        dropped locks; those taken meanwhile by another connection are lost,
        their next write refused saying so, and those left when retaking fails
        (a full lock table) are forgotten: their next write claims them again."""
        dropped, dropped_backend = self._locker, self._locker_backend
        self._locker, self._locker_backend = conn, backend
        if dropped is None:
            return
        dropped.close()
        if dropped_backend is not None:
            end_backend(conn, dropped_backend)
        held, self._claimed = self._claimed, set()
        for session_id in held:
            if self._try_lock(conn, session_id):
                self._claimed.add(session_id)
            else:
                self._lost.add(session_id)

    def _watch(self, stop: threading.Event) -> None:
        """Retake the claims of a lock connection the server dropped, soon after, until *stop*
        (a write would, but only the next one); a server that does not answer, later again."""
        while not stop.wait(_WATCH_SECONDS):
            with contextlib.suppress(psycopg_module().Error, StoreError):
                self._retake_if_dropped(stop)

    def _retake_if_dropped(self, stop: threading.Event) -> None:
        """Replace the lock connection if the server dropped it while it holds claims; connected
        without the lock, not to hold up claims, and given up by a close."""
        with self._locker_lock:
            if not self._dropped():
                return

        def give_up() -> None:
            if stop.is_set():
                raise not_open()

        conn = self._connect_locker(give_up)
        try:
            with self._ended_by_close(conn, stop):
                backend = set_up_locker(conn)
                with self._locker_lock:
                    # Unless a write remade it meanwhile, or the store closed.
                    if self._dropped():
                        self._replace_locker(conn, backend)
                        return
        except BaseException:
            if conn is not self._locker:
                conn.close()
            raise
        conn.close()

    @contextlib.contextmanager
    def _ended_by_close(
        self, conn: psycopg.Connection[Any], stop: threading.Event
    ) -> Iterator[None]:
        """Let a close end *conn*'s statements at once: a server that stops answering after
        the login (or a network that drops its packets) would hold them, and the close waiting
        for their thread, for as long as the connection's TCP keepalives take to notice."""
        with self._connecting_lock:
            if stop.is_set():
                raise not_open()
            self._connecting.add(conn)
        try:
            yield
        finally:
            with self._connecting_lock:
                self._connecting.discard(conn)

    def _dropped(self) -> bool:
        """Whether the lock connection, holding claims, was dropped by the server."""
        conn = self._locker
        if not self._opened or not self._claimed or conn is None:
            return False
        if not conn.closed and readable(conn.fileno()):
            # Idle, it is sent nothing unasked but the server's goodbye (or a notice):
            # a statement tells which.
            with contextlib.suppress(psycopg_module().OperationalError):
                conn.execute("SELECT 1")
        return conn.closed  # so is a broken one

    def _try_lock(self, conn: psycopg.Connection[Any], session_id: str) -> bool:
        try:
            row = conn.execute(_LOCK, (self._lock_key(session_id),)).fetchone()
        except psycopg_module().errors.OutOfMemory as exc:
            if out_of_locks(exc):
                raise lock_table_full(f"session {session_id!r}") from exc
            raise
        return bool(row and row[0])

    def release(self, session_id: str) -> None:
        """Drop the session's advisory lock (a dropped connection already dropped it)."""
        with self._locker_lock:
            self._lost.discard(session_id)
            # A claim of the session in progress ends first, as it would holding this lock.
            while session_id in self._pending:
                self._settled.wait()
            if session_id not in self._claimed:
                return
            self._claimed.discard(session_id)
            conn = require_open(self._locker)
            if conn.broken or conn.closed:
                return
            with contextlib.suppress(psycopg_module().OperationalError):
                conn.execute(_UNLOCK, (self._lock_key(session_id),))

    def taken_elsewhere(self, session_id: str) -> bool:
        """Whether the session's claim, lost with a dropped lock connection, is another's now."""
        return session_id in self._lost

    def unlocked(self, conn: psycopg.Connection[Any], session_ids: list[str]) -> set[str]:
        """The sessions whose advisory lock the lock connection may no longer hold.

        Checked inside the write transaction, after its row locks: a lock lost
        since the probe (the lock connection's backend ended) may already be
        another store's, and a commit without it would make two writers (R12.7).
        A new claimant's handover waits on the row locks this transaction holds.
        While that backend lives it holds every claimed session's lock.
        """
        # Under the lock: the watcher may be swapping a new lock connection in. Whoever holds
        # it runs statements on the lock connection only, never waiting for a commit's locks.
        with self._locker_lock:
            locker = require_open(self._locker)
            backend = self._locker_backend
            if not session_ids or locker.broken or locker.closed or backend is None:
                return set(session_ids)
            alive = conn.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND backend_start = %s", backend
            ).fetchone()
            if alive is None:
                return set(session_ids)
            return {session_id for session_id in session_ids if session_id not in self._claimed}
