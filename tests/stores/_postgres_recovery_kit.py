"""A relay that loses a commit's reply, and what a session's stored log holds, for the PostgresStore
recovery tests."""

from __future__ import annotations

import contextlib

import attrs
import trio

from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import lines

# What a relay sees when either side hangs up.
_HANGUPS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


@attrs.define
class LostReplyProxy:
    """A TCP relay to the server that, once armed, forwards one COMMIT and hangs up before its reply.

    The server commits; the client only sees the connection drop, as when a
    network link or the server's host fails at the worst moment.
    """

    host: str
    port: int
    armed: bool = False
    passed_first: bool = False
    """Whether the next COMMIT once armed is passed on with its reply, the one after it dropped."""
    drops: int = 0

    async def handle(self, client: trio.SocketStream) -> None:
        async with client:
            try:
                server = await trio.open_tcp_stream(self.host, self.port)
            except OSError:
                return
            async with server, trio.open_nursery() as nursery:
                dropping: list[bool] = []
                nursery.start_soon(self._up, client, server, dropping, nursery.cancel_scope)
                nursery.start_soon(self._down, server, client, dropping, nursery.cancel_scope)

    async def _up(
        self,
        client: trio.SocketStream,
        server: trio.SocketStream,
        dropping: list[bool],
        scope: trio.CancelScope,
    ) -> None:
        with contextlib.suppress(*_HANGUPS):
            async for data in client:
                if self.armed and b"COMMIT\x00" in data:
                    if self.passed_first:
                        self.passed_first = False
                    else:
                        self.armed = False
                        dropping.append(True)
                await server.send_all(data)
        scope.cancel()

    async def _down(
        self,
        server: trio.SocketStream,
        client: trio.SocketStream,
        dropping: list[bool],
        scope: trio.CancelScope,
    ) -> None:
        with contextlib.suppress(*_HANGUPS):
            async for data in server:
                if dropping:
                    self.drops += 1  # the server's answer to COMMIT never reaches the client
                    break
                await client.send_all(data)
        scope.cancel()


def stored_next_seq(dsn: str, schema: str, session_id: str) -> int:
    """The next seq the sessions table holds for *session_id*."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT next_seq FROM "{schema}".retinue_sessions WHERE id = %s', (session_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


async def assert_stored(dsn: str, schema: str, session: Session) -> None:
    """The stored log is exactly *session*'s log: nothing lost, nothing twice."""
    async with PostgresStore(dsn, schema=schema) as store:
        loaded = await store.inspect(session.id)
    assert lines(loaded.events[:]) == lines(session.events[:])
    assert stored_next_seq(dsn, schema, session.id) == len(session.events)
