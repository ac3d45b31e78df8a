"""PostgresStore recovery: a commit whose reply is lost, and locks a refused write leaves behind."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from retinue.stores._backend import AppendBatch
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import lines, run_turn

if TYPE_CHECKING:
    import psycopg

pytestmark = pytest.mark.postgres

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


@contextlib.asynccontextmanager
async def lost_reply_proxy(dsn: str) -> AsyncIterator[tuple[LostReplyProxy, str]]:
    """A running :class:`LostReplyProxy` and a DSN that connects through it."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    host = str(params.get("host") or "")
    if not host or host.startswith("/"):
        pytest.skip("the proxy relays TCP only; the test server is on a Unix socket")
    proxy = LostReplyProxy(host, int(params.get("port") or 5432))
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, proxy.handle, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        # Plain text, so the relay can see the COMMIT.
        yield (
            proxy,
            make_conninfo(
                dsn, host="127.0.0.1", port=port, sslmode="disable", gssencmode="disable"
            ),
        )
        nursery.cancel_scope.cancel()


def _stored_next_seq(dsn: str, schema: str, session_id: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT next_seq FROM "{schema}".retinue_sessions WHERE id = %s', (session_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


async def _assert_stored(dsn: str, schema: str, session: Session) -> None:
    """The stored log is exactly *session*'s log: nothing lost, nothing twice."""
    async with PostgresStore(dsn, schema=schema) as store:
        loaded = await store.inspect(session.id)
    assert lines(loaded.events[:]) == lines(session.events[:])
    assert _stored_next_seq(dsn, schema, session.id) == len(session.events)


async def test_postgres_append_whose_commit_reply_is_lost_is_not_written_twice(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.4/R11.5: the retry of a committed append recognises its events; the session lives on."""
    dsn, schema = postgres_schema
    session = Session.create("lost-reply")
    async with (
        lost_reply_proxy(dsn) as (proxy, proxied),
        PostgresStore(proxied, schema=schema) as store,
    ):
        store.attach_new(session)
        run_turn(session)
        await store.flush(session)
        run_turn(session)
        proxy.armed = True
        with pytest.raises(StoreError, match="'lost-reply'") as caught:
            await store.flush(session)
        assert caught.value.code == "STORAGE_ERROR"
        assert proxy.drops == 1
        assert _stored_next_seq(dsn, schema, "lost-reply") == len(session.events)
        await store.flush(session)
        assert store.statistics().buffered_events == 0
        run_turn(session)
        await store.flush(session)
        run_turn(session)
        await store.detach(session)
    await _assert_stored(dsn, schema, session)
    await _assert_real_conflict_is_refused(dsn, schema, "lost-reply")


async def _assert_real_conflict_is_refused(dsn: str, schema: str, session_id: str) -> None:
    """A stale copy appending different events over stored ones still gets ``SEQ_CONFLICT``."""
    async with (
        PostgresStore(dsn, schema=schema) as owner,
        PostgresStore(dsn, schema=schema) as late,
    ):
        stale = await late.inspect(session_id)
        fresh = await owner.load(session_id)
        owner.attach(fresh)
        run_turn(fresh, "the owner's turn")
        await owner.detach(fresh)
        late.attach(stale)
        run_turn(stale, "a different turn")
        with pytest.raises(StoreError, match=repr(session_id)) as caught:
            await late.flush(stale)
        assert caught.value.code == "SEQ_CONFLICT"
        with pytest.raises(StoreError):
            await late.aclose()
    await _assert_stored(dsn, schema, fresh)


async def test_postgres_create_whose_commit_reply_is_lost_is_not_refused(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.3: the retry of a committed create is not refused as a duplicate of itself."""
    dsn, schema = postgres_schema
    session = Session.create("lost-create", created_at=1_700_000_000_000)
    async with (
        lost_reply_proxy(dsn) as (proxy, proxied),
        PostgresStore(proxied, schema=schema) as store,
    ):
        store.attach_new(session)
        run_turn(session)
        proxy.armed = True
        with pytest.raises(StoreError, match="'lost-create'") as caught:
            await store.flush(session)
        assert caught.value.code == "STORAGE_ERROR"
        assert proxy.drops == 1
        await store.flush(session)
        run_turn(session)
        await store.detach(session)
    await _assert_stored(dsn, schema, session)
    # Another store creating the same id, even with the same header and events, is refused.
    twin = Session.create("lost-create", created_at=1_700_000_000_000)
    async with PostgresStore(dsn, schema=schema) as other:
        other.attach_new(twin)
        run_turn(twin)
        run_turn(twin)
        with pytest.raises(StoreError) as caught:
            await other.flush(twin)
        assert caught.value.code == "SESSION_ALREADY_EXISTS"
        with pytest.raises(StoreError):
            await other.aclose()


async def _store_one(dsn: str, schema: str, session_id: str) -> Session:
    session = Session.create(session_id)
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
    return session


async def _owner_resumes(store: PostgresStore, session_id: str) -> None:
    """The session's owner can load it, append and flush (no ``SESSION_LOCKED``)."""
    loaded = await store.load(session_id)
    store.attach(loaded)
    run_turn(loaded)
    await store.detach(loaded)
    assert (await store.inspect(session_id)).last_turn == 2


async def test_postgres_refused_create_gives_up_its_lock(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a create refused as a duplicate leaves no writer lock on the owner's session."""
    dsn, schema = postgres_schema
    await _store_one(dsn, schema, "owned")
    async with (
        PostgresStore(dsn, schema=schema) as owner,
        PostgresStore(dsn, schema=schema) as loser,
    ):
        duplicate = Session.create("owned")
        loser.attach_new(duplicate)
        run_turn(duplicate)
        with pytest.raises(StoreError) as caught:
            await loser.flush(duplicate)
        assert caught.value.code == "SESSION_ALREADY_EXISTS"
        await _owner_resumes(owner, "owned")
        with pytest.raises(StoreError):
            await loser.aclose()


async def test_postgres_failed_group_gives_up_the_locks_it_took(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R12.7: a group whose transaction fails releases the session locks its write took."""
    dsn, schema = postgres_schema
    await _store_one(dsn, schema, "shared")
    async with (
        PostgresStore(dsn, schema=schema) as owner,
        PostgresStore(dsn, schema=schema) as other,
    ):
        copy = await other.inspect("shared")
        other.attach(copy)
        run_turn(copy)

        def broken(*args: object) -> None:
            raise OSError("the network went away")

        backend = other._backend
        assert isinstance(backend, PostgresBackend)
        monkeypatch.setattr(backend._tables, "write_group", broken)
        with pytest.raises(StoreError) as caught:
            await other.flush(copy)
        assert caught.value.code == "STORAGE_ERROR"
        await _owner_resumes(owner, "shared")
        with pytest.raises(StoreError):
            await other.aclose()


async def test_postgres_direct_commit_in_flight_when_the_writer_starts_loses_no_events(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R11.6: a writer started during a direct commit waits for it; no buffered event is dropped.

    Overlapping commits of one session would both be accepted (the second
    recognises the first's events as its own), and each would trim the buffer.
    """
    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    session = Session.create("overlap")
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    backend = store._backend
    write, entered, gate = backend.write, threading.Event(), threading.Event()

    def slow_once(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        monkeypatch.setattr(backend, "write", write)
        entered.set()
        gate.wait(30)
        return write(batches)

    monkeypatch.setattr(backend, "write", slow_once)
    direct_done = trio.Event()

    async def flush_directly() -> None:
        await store.flush(session)
        direct_done.set()

    run_turn(session)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flush_directly)  # no writer yet
            await trio.to_thread.run_sync(entered.wait, 30)
            async with store:
                run_turn(session)
                async with trio.open_nursery() as writes:
                    writes.start_soon(store.flush, session)  # through the writer
                    await trio.sleep(0.3)
                    run_turn(session)
                    gate.set()
                    await direct_done.wait()
                run_turn(session)
                await store.flush(session)
                stored = await store.inspect("overlap")
                assert lines(stored.events[:]) == lines(session.events[:])
                await store.detach(session)
    finally:
        gate.set()


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
    await _assert_stored(dsn, schema, session)


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
    await _assert_stored(dsn, schema, loaded)


async def test_postgres_store_entered_under_a_deadline_gives_up_on_a_silent_server() -> None:
    """Entering a store whose server accepts the connection but never answers honours the
    deadline around it, instead of waiting for the connection timeout (130 s by default,
    10 s here); the connection is given up, and the store is not open."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    accepted: list[trio.SocketStream] = []

    async def accept() -> None:
        while True:
            accepted.append(await listeners[0].accept())

    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/silent?connect_timeout=10")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept)
        started = trio.current_time()
        with trio.move_on_after(0.5) as scope:
            async with store:
                pass
        assert scope.cancelled_caught
        assert trio.current_time() - started < 2
        assert accepted
        nursery.cancel_scope.cancel()
    for stream in accepted:
        await stream.aclose()
    await listeners[0].aclose()
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
