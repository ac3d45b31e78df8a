"""PostgresStore meeting its tables locked by another transaction: commits, creates and reads fail
once with TABLE_LOCKED, a refused group opens no transaction."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import flush_together, run_turn
from tests.stores._postgres_locks_kit import backend_of, count_commits, store_session

pytestmark = pytest.mark.postgres


@contextmanager
def _table_locked(dsn: str, schema: str, table: str) -> Iterator[Callable[[], None]]:
    """Hold *table* in ACCESS EXCLUSIVE mode in another connection's transaction, as a
    migration or a hand-run ``LOCK TABLE`` does; yields the function that lets go of it.

    Let go after 20 s at the latest, so that a store waiting for it makes its test fail
    rather than hang.
    """
    import psycopg

    blocker = psycopg.connect(dsn)
    let_go = threading.Timer(20, blocker.rollback)
    try:
        blocker.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS EXCLUSIVE MODE')
        let_go.start()

        def release() -> None:
            let_go.cancel()
            blocker.rollback()

        yield release
    finally:
        let_go.cancel()
        blocker.close()


@pytest.mark.parametrize("table", ["retinue_sessions", "retinue_segments"])
async def test_postgres_table_locked_elsewhere_fails_the_group_once_naming_the_lock(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    """R11.5: a lock on one of the store's tables held by another transaction stops every
    session's commit alike. The group fails once, after one lock timeout, with TABLE_LOCKED
    naming the table and the lock, rather than being split and waiting out the timeout again for each
    session; the events stay buffered and are committed once the lock is gone."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    sessions = [Session.create(session_id) for session_id in ("a", "b", "c")]
    async with PostgresStore(dsn, schema=schema) as store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        assert await flush_together(store, sessions) == {}
        commits = count_commits(store, monkeypatch)
        for session in sessions:
            run_turn(session)
        with _table_locked(dsn, schema, table):
            errors = await flush_together(store, sessions)
        assert sorted(errors) == ["a", "b", "c"]
        for error in errors.values():
            assert error.code == "TABLE_LOCKED"
            assert f'"{schema}".{table} (AccessExclusiveLock by pid ' in error.message
        assert commits == [1]
        assert await flush_together(store, sessions) == {}
        for session in sessions:
            await store.detach(session)
        for session in sessions:
            assert len((await store.inspect(session.id)).events) == len(session.events)


async def test_postgres_creates_meeting_a_table_lock_are_not_refused_as_existing(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3, R11.5: new sessions whose first flush meets a lock on the sessions table held
    by another transaction fail together with TABLE_LOCKED naming the table, after one
    wait: not each after its own wait, and not SESSION_ALREADY_EXISTS (or SESSION_LOCKED)
    for ids nobody stored. Their locks are given up, and they are created once the lock
    is gone."""
    import retinue.stores._pghandover as pghandover

    monkeypatch.setattr(pghandover, "_HANDOVER_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    sessions = [Session.create(session_id) for session_id in ("a", "b", "c")]
    async with PostgresStore(dsn, schema=schema) as store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        with _table_locked(dsn, schema, "retinue_sessions"):
            started = trio.current_time()
            errors = await flush_together(store, sessions)
            assert trio.current_time() - started < 0.3 * len(sessions)
        assert sorted(errors) == ["a", "b", "c"]
        for error in errors.values():
            assert error.code == "TABLE_LOCKED"
            assert f'"{schema}".retinue_sessions' in error.message
        assert not any(backend_of(store)._claims.holds(session.id) for session in sessions)
        assert await flush_together(store, sessions) == {}
        for session in sessions:
            await store.detach(session)
            assert len((await store.inspect(session.id)).events) == len(session.events)


async def test_postgres_reads_meeting_a_table_lock_fail_naming_it_rather_than_wait_on(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5: a listing, a lookup or a read that meets an exclusive lock on the store's
    tables held by another transaction fails with TABLE_LOCKED naming the table once the
    store's lock timeout is over, as a commit does, instead of waiting in its worker
    thread, past any deadline, for as long as that transaction lasts."""
    import retinue.stores._pgreaders as readers

    monkeypatch.setattr(readers, "_READ_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stored")
    async with PostgresStore(dsn, schema=schema, create=False) as store:
        reads: list[Callable[[], Any]] = [
            store.list,
            lambda: store.exists("stored"),
            lambda: store.inspect("stored"),
        ]
        with _table_locked(dsn, schema, "retinue_sessions"):
            for read in reads:
                started = trio.current_time()
                with pytest.raises(StoreError) as caught:
                    await read()
                assert caught.value.code == "TABLE_LOCKED"
                assert f'"{schema}".retinue_sessions' in caught.value.message
                assert trio.current_time() - started < 5
        assert [header.id for header in await store.list()] == ["stored"]


async def test_postgres_group_whose_every_batch_is_refused_opens_no_transaction(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3, R11.5: a flush refused when claiming its session (an id another store holds) writes
    nothing, so it starts no transaction: it is refused at once with SESSION_ALREADY_EXISTS even
    while another transaction holds a lock on the sessions table, not after waiting out the lock
    timeout in an empty transaction to fail with TABLE_LOCKED, naming a lock that has nothing to do
    with it."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    held, second = Session.create("taken"), Session.create("taken")
    async with (
        PostgresStore(dsn, schema=schema) as holder,
        PostgresStore(dsn, schema=schema) as store,
    ):
        holder.attach_new(held)
        run_turn(held)
        await holder.flush(held)
        store.attach_new(second)
        run_turn(second)
        commits = count_commits(store, monkeypatch)
        with (
            _table_locked(dsn, schema, "retinue_sessions"),
            pytest.raises(StoreError) as caught,
        ):
            await store.flush(second)
        assert caught.value.code == "SESSION_ALREADY_EXISTS"
        assert "'taken'" in caught.value.message
        assert commits == [0]
        store._tracked.pop("taken").unsubscribe()  # refused: nothing left to drain on exit
        await holder.detach(held)


async def test_a_deadline_ends_a_postgres_load_whose_read_waits_for_a_table_lock(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.8: a load whose read of the events meets an exclusive lock on ``retinue_segments`` ends
    at its deadline and gives up its claim, so the session loads once the lock is gone; its read
    does not wait out the read lock timeout in its worker thread, past the deadline. Waited out, it
    fails ``TABLE_LOCKED`` naming the table."""
    import retinue.stores._pgreaders as readers

    monkeypatch.setattr(readers, "_READ_LOCK_TIMEOUT_MS", 5_000)
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stored")
    async with PostgresStore(dsn, schema=schema) as store:
        with _table_locked(dsn, schema, "retinue_segments") as release:
            with trio.move_on_after(0.3) as deadline:
                await store.load("stored")
            assert deadline.cancelled_caught
            monkeypatch.setattr(readers, "_READ_LOCK_TIMEOUT_MS", 300)
            with pytest.raises(StoreError) as caught:
                await store.load("stored")
            assert caught.value.code == "TABLE_LOCKED"
            assert f'"{schema}".retinue_segments' in caught.value.message
            release()
        assert not backend_of(store)._claims.holds("stored")
        loaded = await store.load("stored")
        assert loaded.last_turn == 1
