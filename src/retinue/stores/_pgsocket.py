"""The socket of a PostgreSQL connection (whether input waits on it, shutting it down), and a
lock whose holder may wait on one for an answer that never comes."""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ._pgschema import psycopg_module

if TYPE_CHECKING:
    import psycopg

__all__ = ["held_in_slices", "readable", "shut_down", "shut_down_after"]


def readable(fileno: int) -> bool:
    """Whether *fileno* has input waiting; ``select()`` would refuse a descriptor past 1023."""
    with selectors.DefaultSelector() as selector:
        selector.register(fileno, selectors.EVENT_READ)
        return bool(selector.select(0))


def shut_down(conn: psycopg.Connection[Any]) -> None:
    """Shut *conn*'s socket down: a statement waiting on it fails at once, the connection broken."""
    with (
        contextlib.suppress(OSError, psycopg_module().Error),
        socket.socket(fileno=os.dup(conn.fileno())) as sock,
    ):
        sock.shutdown(socket.SHUT_RDWR)


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
        # Not after the block has closed *conn*: its descriptor could be another socket's by then.
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
