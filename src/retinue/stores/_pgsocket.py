"""The socket of a PostgreSQL connection (whether input waits on it, shutting it down, a cancel
request beside it), and a lock whose holder may wait on one for an answer that never comes."""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import socket
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, final

from ._pgschema import psycopg_module

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SocketEnd",
    "cancel_soon",
    "connect_endable",
    "held_in_slices",
    "readable",
    "shut_down",
    "shut_down_after",
]


def readable(fileno: int) -> bool:
    """Whether *fileno* has input waiting; ``select()`` would refuse a descriptor past 1023."""
    with selectors.DefaultSelector() as selector:
        selector.register(fileno, selectors.EVENT_READ)
        return bool(selector.select(0))


@final
class SocketEnd:
    """A descriptor of its own for a connection's socket, made with the connection: shut down,
    it ends the connection, whoever holds or closes it meanwhile.

    The connection's own descriptor is closed by whichever thread closes the
    connection (or by libpq as it finds it lost), its number free at once for
    another socket: read from the connection by another thread, it may name that
    socket by the time it is used. This one names the connection's socket until
    :meth:`close`, after which a shutdown does nothing."""

    def __init__(self, fileno: int) -> None:
        self._sock = socket.socket(fileno=os.dup(fileno))
        self._lock = threading.Lock()
        """Held by a shutdown and by :meth:`close`: a shutdown never meets a number closed under it."""

    def shut_down(self) -> None:
        """End the connection: a statement waiting on its socket fails at once."""
        with self._lock, contextlib.suppress(OSError):
            if self._sock.fileno() != -1:
                self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Let the socket go: kept open, it would keep the connection open past its close."""
        with self._lock:
            self._sock.close()


@functools.cache
def _endable_connection() -> type[psycopg.Connection[Any]]:
    """psycopg's connection, keeping the :class:`SocketEnd` of its socket until it is closed."""
    psycopg_module()  # the missing dependency named, before the import below fails
    import psycopg

    class EndableConnection(psycopg.Connection[Any]):
        socket_end: SocketEnd | None = None

        def close(self) -> None:
            try:
                super().close()
            finally:
                if self.socket_end is not None:
                    self.socket_end.close()

    return EndableConnection


def connect_endable(conninfo: str, **params: Any) -> psycopg.Connection[Any]:
    """``psycopg.connect(conninfo, **params)``: a connection that :func:`shut_down` can end."""
    conn = _endable_connection().connect(conninfo, **params)
    try:
        # Before any statement: only this thread has the connection, its socket its own.
        conn.socket_end = SocketEnd(conn.fileno())  # type: ignore[attr-defined]
    except BaseException:
        conn.close()
        raise
    return conn


def shut_down(conn: psycopg.Connection[Any] | None) -> None:
    """Shut *conn*'s socket down: a statement waiting on it fails at once, the connection broken.

    Only a connection made by :func:`connect_endable` (a closed one: nothing), from any thread,
    whatever the thread that holds it does meanwhile."""
    end: SocketEnd | None = getattr(conn, "socket_end", None)
    if end is not None:
        end.shut_down()


def cancel_soon(conn: psycopg.Connection[Any]) -> None:
    """Ask the server to cancel the statement *conn* runs, if any, from a thread of its own: a
    server that stopped answering holds a cancel request for its whole timeout."""
    threading.Thread(
        target=_cancel, args=(conn,), name="retinue-postgres-cancel", daemon=True
    ).start()


def _cancel(conn: psycopg.Connection[Any]) -> None:
    """Cancel the statement *conn* runs, if any; it may have ended, its connection closed."""
    with contextlib.suppress(psycopg_module().Error):
        conn.cancel_safe(timeout=5)


@contextlib.contextmanager
def shut_down_after(conn: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
    """Shut *conn*'s socket down if the block has not ended within *seconds*.

    A server that stops answering while the network still acknowledges what is
    sent holds a statement for good: TCP keepalives see nothing wrong."""
    timer = threading.Timer(seconds, shut_down, (conn,))
    timer.name = "retinue-postgres-bound"
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()


@contextlib.contextmanager
def held_in_slices(
    lock: threading.Lock, slice_seconds: float, between: Callable[[], None]
) -> Iterator[None]:
    """*lock*, held for the block; *between* runs after each *slice_seconds* it is held
    elsewhere (it may raise, giving the wait up, or end what the holder waits for)."""
    while not lock.acquire(timeout=slice_seconds):
        between()
    try:
        yield
    finally:
        lock.release()
