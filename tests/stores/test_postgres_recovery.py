"""PostgresStore recovery: a commit whose reply is lost, locks a refused write leaves behind, a
direct commit in flight when the writer starts."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Sequence

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from retinue.stores._backend import AppendBatch
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import lines, run_turn
from tests.stores._postgres_locks_kit import backend_of
from tests.stores._postgres_recovery_kit import LostReplyProxy, assert_stored, stored_next_seq

pytestmark = pytest.mark.postgres


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
        assert caught.value.code == "COMMIT_UNKNOWN"
        assert proxy.drops == 1
        assert stored_next_seq(dsn, schema, "lost-reply") == len(session.events)
        await store.flush(session)
        assert store.statistics().buffered_events == 0
        run_turn(session)
        await store.flush(session)
        run_turn(session)
        await store.detach(session)
    await assert_stored(dsn, schema, session)
    await _assert_real_conflict_is_refused(dsn, schema, "lost-reply")


async def test_postgres_append_whose_retried_commit_reply_is_lost_fails_commit_unknown(
    postgres_schema: tuple[str, str],
) -> None:
    """The server ended the idle write connection, so the group is written again on a new one,
    whose COMMIT reply is lost: the flush fails ``COMMIT_UNKNOWN``, and the next one recognises
    the events committed, writing none twice."""
    dsn, schema = postgres_schema
    session = Session.create("lost-retry")
    async with (
        lost_reply_proxy(dsn) as (proxy, proxied),
        PostgresStore(proxied, schema=schema) as store,
    ):
        store.attach_new(session)
        run_turn(session)
        await store.flush(session)
        _end_write_connection(dsn, store)
        run_turn(session)
        proxy.armed = True
        proxy.passed_first = True  # the new write connection's set-up commits first
        with pytest.raises(StoreError, match="'lost-retry'") as caught:
            await store.flush(session)
        assert caught.value.code == "COMMIT_UNKNOWN"
        assert proxy.drops == 1
        assert stored_next_seq(dsn, schema, "lost-retry") == len(session.events)
        await store.flush(session)
        await store.detach(session)
    await assert_stored(dsn, schema, session)


def _end_write_connection(dsn: str, store: PostgresStore) -> None:
    """End the backend of *store*'s write connection, idle: its next statement finds it lost."""
    import psycopg

    writer = backend_of(store)._writer
    assert writer is not None
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s, 5000)", (writer.info.backend_pid,))


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
    await assert_stored(dsn, schema, fresh)


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
    await assert_stored(dsn, schema, session)
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
