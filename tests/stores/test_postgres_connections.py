"""PostgresStore connections: those the server dropped are made again for the next write or read,
and a close or an entry under a deadline does not wait on a blocked or silent server."""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import REAL_DEADLINE, attach_undrained, close_during_entry, lines, run_turn
from tests.stores._postgres_recovery_kit import LostReplyProxy, assert_stored

if TYPE_CHECKING:
    import psycopg

pytestmark = pytest.mark.postgres


async def test_postgres_read_in_flight_on_close_closes_its_connection(
    postgres_schema: tuple[str, str],
) -> None:
    """A read that ends after close does not pool its connection, and no read starts after it."""
    dsn, schema = postgres_schema
    backend = PostgresBackend(dsn, schema=schema)
    backend.open()

    def read_during_close(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        backend.close()
        return conn

    conn = backend._pool.run(read_during_close)
    assert conn.closed
    assert backend._pool.readers == []
    with pytest.raises(StoreError) as caught:
        backend.contains("late")
    assert caught.value.code == "STORE_CLOSED"


async def test_postgres_close_cancels_a_commit_blocked_in_the_server(
    postgres_schema: tuple[str, str],
) -> None:
    """Closing under a deadline does not wait for a commit blocked by a lock held elsewhere."""
    import psycopg

    dsn, schema = postgres_schema
    session = Session.create("blocked")
    blocker = psycopg.connect(dsn)
    # Let go in the end, so that a close that waits for the write fails rather than hangs.
    release = threading.Timer(10, blocker.rollback)
    try:
        with trio.CancelScope() as outer:
            async with PostgresStore(dsn, schema=schema) as store:
                store.attach_new(session)
                run_turn(session)
                await store.flush(session)
                blocker.execute(f'LOCK TABLE "{schema}".retinue_segments IN ACCESS EXCLUSIVE MODE')
                run_turn(session)
                with trio.move_on_after(0.3):
                    await store.flush(session)
                release.start()
                outer.deadline = trio.current_time() + 0.5
                started = trio.current_time()
        assert trio.current_time() - started < 5
    finally:
        release.cancel()
        blocker.close()


async def test_postgres_write_connection_dropped_while_idle_is_replaced_for_the_next_flush(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.5: a write connection the server closed while idle (a restart, an idle timeout)
    fails only its first statement; nothing was committed, so the group is written again on
    a fresh connection and the flush succeeds, nothing lost and nothing twice.
    """
    import psycopg

    dsn, schema = postgres_schema
    session = Session.create("idle")
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        await store.flush(session)
        writer = store._backend._writer  # type: ignore[attr-defined]
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 30000)", (writer.info.backend_pid,))
        run_turn(session)
        await store.flush(session)
        await store.detach(session)
    await assert_stored(dsn, schema, session)


def _drop_connections(dsn: str, store: PostgresStore) -> None:
    """End every connection of *store* on the server, as a restart does; return once gone."""
    import psycopg

    backend = store._backend
    assert isinstance(backend, PostgresBackend)
    conns = [*backend._pool.readers, backend._writer, backend._claims._locker]
    pids = [conn.info.backend_pid for conn in conns if conn is not None and not conn.closed]
    with psycopg.connect(dsn, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))


async def test_postgres_reads_after_a_restart_run_again_on_a_fresh_connection(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.5: a pooled reader connection the server closed (a restart, an idle timeout) fails
    only its first statement; a read changes nothing, so it runs again on a fresh connection.
    Listing, lookup, inspection and load each succeed after the server dropped every connection,
    as a flush does."""
    dsn, schema = postgres_schema
    session = Session.create("restarted")
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
        _drop_connections(dsn, store)
        assert [header.id for header in await store.list()] == ["restarted"]
        _drop_connections(dsn, store)
        assert await store.exists("restarted")
        _drop_connections(dsn, store)
        assert len((await store.inspect("restarted")).events) == len(session.events)
        _drop_connections(dsn, store)
        loaded = await store.load("restarted")
        store.attach(loaded)
        run_turn(loaded)
        await store.detach(loaded)
    await assert_stored(dsn, schema, loaded)


@asynccontextmanager
async def _silent_server() -> AsyncIterator[tuple[int, list[trio.SocketStream]]]:
    """A local port that accepts connections and never answers, as a hung server does;
    yields it and the connections it accepted, closed on the way out."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    accepted: list[trio.SocketStream] = []

    async def accept() -> None:
        while True:
            accepted.append(await listeners[0].accept())

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(accept)
            try:
                yield listeners[0].socket.getsockname()[1], accepted
            finally:
                nursery.cancel_scope.cancel()
    finally:
        # Closed at once, not awaited: a cancel from outside would stop the closing.
        for stream in accepted:
            stream.socket.close()
        listeners[0].socket.close()


async def test_postgres_store_entered_under_a_deadline_gives_up_on_a_silent_server() -> None:
    """Entering a store whose server accepts the connection but never answers honours the
    deadline around it, instead of waiting for the connection timeout (130 s by default,
    10 s here); the connection is given up, and the store is not open."""
    async with _silent_server() as (port, accepted):
        store = PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/silent?connect_timeout=10")
        started = trio.current_time()
        with trio.move_on_after(0.5) as scope:
            async with store:
                pass
        assert scope.cancelled_caught
        assert trio.current_time() - started < 2
        assert accepted
    assert "unopened" in repr(store)


@attrs.define
class _SilencingProxy:
    """A TCP relay to the server that, once silenced, accepts new connections and never
    answers them (a server host that hangs), while those relayed already go on."""

    relay: LostReplyProxy
    silent: bool = False

    async def handle(self, client: trio.SocketStream) -> None:
        if not self.silent:
            await self.relay.handle(client)
            return
        async with client:
            await trio.sleep_forever()


async def test_postgres_close_does_not_wait_for_a_commit_connecting_to_a_silent_server(
    postgres_schema: tuple[str, str],
) -> None:
    """A store left under a deadline while its commit is remaking the write connection the
    server dropped, to a server that accepts it and never answers, closes at once: the
    connect is given up (nothing of the group was sent) rather than holding the exit for
    the connection timeout (130 s by default, 10 s here)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    dsn, schema = postgres_schema
    params = conninfo_to_dict(dsn)
    host = str(params.get("host") or "")
    if not host or host.startswith("/"):
        pytest.skip("the proxy relays TCP only; the test server is on a Unix socket")
    proxy = _SilencingProxy(LostReplyProxy(host, int(params.get("port") or 5432)))
    session = Session.create("silenced")
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, proxy.handle, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        relayed = make_conninfo(
            dsn, host="127.0.0.1", port=port, sslmode="disable", connect_timeout=10
        )
        with trio.CancelScope() as outer:
            async with PostgresStore(relayed, schema=schema) as store:
                store.attach_new(session)
                run_turn(session)
                await store.flush(session)
                stored = len(session.events)
                proxy.silent = True
                writer = store._backend._writer  # type: ignore[attr-defined]
                with psycopg.connect(dsn, autocommit=True) as admin:
                    admin.execute(
                        "SELECT pg_terminate_backend(%s, 30000)", (writer.info.backend_pid,)
                    )
                run_turn(session)
                with trio.move_on_after(0.3):
                    await store.flush(session)
                outer.deadline = trio.current_time() + 0.5
                started = trio.current_time()
        assert trio.current_time() - started < 5
        nursery.cancel_scope.cancel()
    async with PostgresStore(dsn, schema=schema) as other:
        loaded = await other.inspect("silenced")
    assert lines(loaded.events[:]) == lines(session.events[:stored])


async def test_a_draining_close_fails_with_an_entrys_open_that_timed_out_connecting() -> None:
    """R11.6: a close with a session to drain waits for an entry's open connecting to a server that
    accepts the connection and never answers; when that connect times out, the close fails with the
    open's error, having connected once, not again to wait out the connect timeout a second time
    (130 s by default) and fail alike."""
    async with _silent_server() as (port, accepted):
        # 2 s: the shortest connect timeout libpq keeps.
        store = PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/silent?connect_timeout=2")
        attach_undrained(store, "undrained")
        with trio.fail_after(REAL_DEADLINE):
            failure = await close_during_entry(store)
    assert len(accepted) == 1
    assert failure is not None
    assert failure.code == "STORAGE_ERROR"
    assert "no answer from the PostgreSQL server within the connect timeout" in str(failure)
