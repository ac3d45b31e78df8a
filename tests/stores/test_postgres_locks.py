"""PostgresStore writer locks: a dropped or cut-off lock connection, a lock lost before a commit,
loads and detaches cancelled while they hold one, concurrent creates."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session, TurnEnd
from retinue.stores import PostgresStore
from retinue.stores._backend import AppendBatch
from tests.stores._kit import run_turn
from tests.stores._postgres_locks_kit import (
    backend_of,
    drop_lock_connection,
    drops_noticed_by_use_only,
    store_session,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _drops_noticed_by_use_only(monkeypatch: pytest.MonkeyPatch) -> None:
    drops_noticed_by_use_only(monkeypatch)


def _notice_drop(store: PostgresStore) -> None:
    """Run a statement on the dropped lock connection, as the store's next use of it would."""
    import psycopg

    with pytest.raises(psycopg.OperationalError):
        backend_of(store)._claims._locker.execute("SELECT 1")


async def test_postgres_load_after_the_lock_connection_dropped_reconnects(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a lock connection the server dropped is reconnected by the next load."""
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "quiet")
    async with PostgresStore(dsn, schema=schema) as store:
        drop_lock_connection(dsn, store)
        loaded = await store.load("quiet")
        assert loaded.last_turn == 1


async def test_postgres_reconnected_lock_is_held_once(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: after a reconnect, a retaken lock is not taken twice, so one release frees it.

    The other session's lock, taken by another store while the connection was
    down, stays theirs: this store may no longer write it.
    """
    dsn, schema = postgres_schema
    for session_id in ("lost", "kept"):
        await store_session(dsn, schema, session_id)
    async with (
        PostgresStore(dsn, schema=schema) as store,
        PostgresStore(dsn, schema=schema) as other,
    ):
        lost = await store.load("lost")
        store.attach(lost)
        await store.load("kept")
        drop_lock_connection(dsn, store)
        await other.load("lost")
        _notice_drop(store)
        kept = await store.load("kept")
        store.attach(kept)
        await store.detach(kept)
        async with PostgresStore(dsn, schema=schema) as third:
            assert (await third.load("kept")).last_turn == 1
        run_turn(lost)
        with pytest.raises(StoreError) as refused:
            await store.flush(lost)
        assert refused.value.code == "SESSION_LOCKED"
        with pytest.raises(StoreError):
            await store.aclose()


async def test_postgres_load_cancelled_during_its_repair_leaves_no_lock(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R12.7: a load cancelled while its repair is being written gives the lock up after it.

    The write claims the session: a release before it ends would leave a lock
    nobody owns, and every other store would be refused the session.
    """
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "crashed", open_turn=True)
    async with PostgresStore(dsn, schema=schema) as store:
        backend = backend_of(store)
        write = backend.write
        with trio.CancelScope() as scope:

            def cancel_then_write(batches: Sequence[AppendBatch]) -> object:
                trio.from_thread.run_sync(scope.cancel)
                deadline = time.monotonic() + 0.5
                while backend._claims.holds("crashed") and time.monotonic() < deadline:
                    time.sleep(0.01)  # noqa: TID251 - a worker thread, giving the release its chance
                return write(batches)

            monkeypatch.setattr(backend, "write", cancel_then_write)
            await store.load("crashed")
        monkeypatch.undo()
        assert scope.cancelled_caught
        # The cancelled load returned only once its repair was written.
        assert isinstance((await store.inspect("crashed")).events[-1].data, TurnEnd)
        async with PostgresStore(dsn, schema=schema) as other:
            assert (await other.load("crashed")).last_turn == 2


async def test_postgres_stores_in_different_schemas_do_not_lock_each_other(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: the writer lock belongs to a schema's session, not to every session of that id."""
    import psycopg

    dsn, schema = postgres_schema
    neighbour = f"{schema}_n"
    try:
        async with (
            PostgresStore(dsn, schema=schema) as store,
            PostgresStore(dsn, schema=neighbour) as other,
        ):
            mine, theirs = Session.create("main"), Session.create("main")
            store.attach_new(mine)
            other.attach_new(theirs)
            run_turn(mine)
            run_turn(theirs)
            await store.flush(mine)
            await other.flush(theirs)
            await store.detach(mine)
            await other.detach(theirs)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{neighbour}" CASCADE')


async def test_postgres_detach_cancelled_after_its_flush_gives_up_the_lock(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R12.7: a detach cancelled once it stopped tracking the session still releases its claim."""
    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    session = Session.create("detached")
    store.attach_new(session)
    run_turn(session)
    backend = backend_of(store)
    write = backend.write
    with trio.CancelScope() as scope:

        def write_then_cancel(batches: Sequence[AppendBatch]) -> object:
            result = write(batches)
            trio.from_thread.run_sync(scope.cancel)
            return result

        monkeypatch.setattr(backend, "write", write_then_cancel)
        await store.detach(session)
    monkeypatch.undo()
    assert "detached" not in store._tracked
    async with PostgresStore(dsn, schema=schema) as other:
        assert (await other.load("detached")).last_turn == 1
    await store.aclose()


async def test_postgres_load_of_an_unstored_id_does_not_lock_out_its_creator(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.3, R12.7: a probe for an id not yet stored takes no lock its creator would meet."""
    dsn, schema = postgres_schema
    async with (
        PostgresStore(dsn, schema=schema) as creator,
        PostgresStore(dsn, schema=schema) as prober,
    ):
        await prober.list()
        with pytest.raises(StoreError) as caught:
            await trio.to_thread.run_sync(backend_of(prober).claim, "new")
        assert caught.value.code == "SESSION_NOT_FOUND"
        session = Session.create("new")
        creator.attach_new(session)
        run_turn(session)
        await creator.detach(session)
        assert await prober.exists("new")


async def test_postgres_commit_is_refused_when_its_lock_was_lost_after_the_probe(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: the lock is checked inside the write transaction. A lock connection that drops
    between the probe and the commit lets another store claim and read the session; the first
    store's commit is then refused (its events stay buffered), so the log that store read is
    still the stored one: never two writers.
    """
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "x")
    async with (
        PostgresStore(dsn, schema=schema) as first,
        PostgresStore(dsn, schema=schema) as second,
    ):
        live = await first.load("x")
        first.attach(live)
        run_turn(live)
        claims, other = backend_of(first)._claims, backend_of(second)
        probe = claims.probe
        read: list[int] = []

        def probe_then_lose_the_lock() -> None:
            claims.probe = probe  # type: ignore[method-assign]
            probe()
            drop_lock_connection(dsn, first)
            other.claim("x")
            stored = other.read("x")
            assert stored is not None
            read.append(len(stored.records))

        claims.probe = probe_then_lose_the_lock  # type: ignore[method-assign]
        with pytest.raises(StoreError) as refused:
            await first.flush(live)
        assert refused.value.code == "SESSION_LOCKED"
        stored = other.read("x")
        assert stored is not None
        assert len(stored.records) == read[0] < len(live.events)
        assert first.statistics().buffered_events > 0
        other.release("x")
        await first.flush(live)  # the lock retaken, the buffered events commit
        await first.detach(live)
        stored = other.read("x")
        assert stored is not None
        assert len(stored.records) == len(live.events)


class _CutOff:
    """A lock connection cut off on the client's side only (say, by a load balancer's idle
    timeout): the store finds it broken, while its backend lives on holding its locks."""

    broken = True

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.closed = False

    def close(self) -> None:
        self.closed = True  # the server is not told: the backend stays

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


async def test_postgres_lock_connection_cut_off_with_its_backend_alive_keeps_its_sessions(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: when the lock connection is cut off but the server still runs its backend, the
    remade connection ends that backend, which holds this store's own locks, and retakes
    them: the store's sessions are not refused as written by another process for as long as
    the server takes to notice (its TCP keepalive: hours by default)."""
    dsn, schema = postgres_schema
    session = Session.create("mine")
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        await store.flush(session)
        claims = backend_of(store)._claims
        backend = claims._locker
        assert backend is not None
        claims._locker = _CutOff(backend)  # type: ignore[assignment]
        try:
            run_turn(session)
            await store.flush(session)
            async with PostgresStore(dsn, schema=schema) as other:
                with pytest.raises(StoreError) as caught:
                    await other.load("mine")
                assert caught.value.code == "SESSION_LOCKED"
            await store.detach(session)
        finally:
            backend.close()
    async with PostgresStore(dsn, schema=schema) as store:
        assert len((await store.inspect("mine")).events) == len(session.events)


async def test_postgres_concurrent_creates_of_one_id_refuse_the_later_as_existing(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.3: of two stores creating the same id at once one commits; the other is refused
    with ``SESSION_ALREADY_EXISTS``, as in the other stores, whichever claimed it first."""
    dsn, schema = postgres_schema
    outcomes: list[str] = []

    async def create(store: PostgresStore) -> None:
        session = Session.create("twice")
        store.attach_new(session)
        run_turn(session)
        try:
            await store.flush(session)
        except StoreError as exc:
            outcomes.append(str(exc.code))
        else:
            outcomes.append("stored")

    async with (
        PostgresStore(dsn, schema=schema) as one,
        PostgresStore(dsn, schema=schema) as two,
    ):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(create, one)
            nursery.start_soon(create, two)
        assert sorted(outcomes) == ["SESSION_ALREADY_EXISTS", "stored"]
        for store in (one, two):
            with contextlib.suppress(StoreError):
                await store.aclose()
