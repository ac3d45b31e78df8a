"""PostgresStore ends a lock connection the server leaves unanswered by shutting its socket
down, never a socket that took the number of a descriptor the connection closed meanwhile."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from retinue.stores import PostgresStore, _pgclaims, _pgsocket
from tests.stores._postgres_locks_kit import backend_of

if TYPE_CHECKING:
    import psycopg

pytestmark = pytest.mark.postgres


@contextlib.contextmanager
def _pair_numbered(number: int) -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair of sockets, one of them on descriptor *number* (just freed)."""
    made: list[socket.socket] = []
    try:
        for _ in range(50):
            pair = socket.socketpair()
            made += pair
            if number in (pair[0].fileno(), pair[1].fileno()):
                yield pair
                return
        pytest.fail(f"no socket took descriptor {number}")
    finally:
        for sock in made:
            sock.close()


async def test_postgres_ending_a_lock_connection_closed_meanwhile_spares_the_socket_on_its_number(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close ends the lock connection its holder waits on without the claims lock. The
    holder closes that connection just as the close reads it, and another socket takes its
    descriptor's number: the close's shutdown leaves that socket working."""
    dsn, schema = postgres_schema
    async with PostgresStore(dsn, schema=schema) as store:
        claims = backend_of(store)._claims
        locker = claims._locker
        assert locker is not None
        number = locker.fileno()
        # The number as the close read it, before the holder closed the connection.
        monkeypatch.setattr(locker, "fileno", lambda: number)
        pairs: list[tuple[socket.socket, socket.socket]] = []
        with contextlib.ExitStack() as stack:
            shut_down = _pgsocket.shut_down

            def closed_meanwhile(conn: psycopg.Connection[Any] | None) -> None:
                if conn is locker and not pairs:
                    locker.close()
                    pairs.append(stack.enter_context(_pair_numbered(number)))
                shut_down(conn)

            monkeypatch.setattr(_pgclaims, "shut_down", closed_meanwhile)
            claims.end_statements()
            near, far = pairs[0]
            near.sendall(b"x")
            assert far.recv(1) == b"x"
