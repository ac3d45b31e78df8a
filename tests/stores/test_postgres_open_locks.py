"""Opening a PostgresStore while another connection holds the lock its tables are created under."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

import retinue.stores._pgreaders as readers
from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import (
    REAL_DEADLINE,
    attach_undrained,
    close_during_entry,
    count_opens,
    enter_noting_refusal,
    lines,
    run_turn,
)

pytestmark = pytest.mark.postgres

DEADLINE = 0.3
"""Real seconds: the open waits in a worker thread, which a virtual clock would race ahead."""


@contextmanager
def _creation_locked(dsn: str) -> Iterator[None]:
    """Hold the lock a store creates its tables under, as another store creating them does."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtextextended('retinue-schema', 0))")
        yield


@pytest.fixture(autouse=True)
def _short_lock_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock timeout a failing open waits out in seconds, not in 30."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 5_000)


async def test_a_deadline_ends_a_postgres_open_waiting_for_another_connections_lock(
    postgres_schema: tuple[str, str],
) -> None:
    """An open waiting for the lock another store creates the tables under ends with the deadline
    around it, rather than waiting out the lock timeout in its worker thread to fail
    ``STORAGE_ERROR``. Once the lock is gone the store opens."""
    dsn, schema = postgres_schema
    with _creation_locked(dsn), trio.move_on_after(DEADLINE) as deadline:
        async with PostgresStore(dsn, schema=schema):
            pass
    assert deadline.cancelled_caught
    session = Session.create("after-the-lock")
    run_turn(session)
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            store.attach_new(session)
        async with PostgresStore(dsn, schema=schema) as store:
            assert lines((await store.load(session.id)).events) == lines(session.events)


async def test_a_close_ends_a_postgres_entry_waiting_for_another_connections_lock(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.6: an entry whose open waits for the lock another store creates the tables under ends
    when the store closes, refused ``STORE_CLOSED``, not after waiting out the lock timeout to be
    refused ``STORAGE_ERROR``."""
    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    refusals: list[str] = []

    with _creation_locked(dsn), trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(enter_noting_refusal, store, refusals)
            await trio.sleep(DEADLINE)  # real seconds: the entry waits in its worker thread
            await store.aclose()
    assert refusals == ["STORE_CLOSED"]


async def test_a_postgres_open_waiting_out_the_creation_lock_says_what_holds_it(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open that waits out the lock timeout on the lock another store creates the tables under
    fails ``STORAGE_ERROR`` saying another transaction holds it, and for how long it waited, not
    with the server's bare lock timeout of the last attempt."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    with _creation_locked(dsn), trio.fail_after(REAL_DEADLINE), pytest.raises(StoreError) as caught:
        await _enter_and_leave(PostgresStore(dsn, schema=schema))
    assert caught.value.code == "STORAGE_ERROR"
    assert "another transaction holds the lock they are created under" in str(caught.value)
    assert "waited for 0.3 s" in str(caught.value)


async def _enter_and_leave(store: PostgresStore) -> None:
    async with store:
        pass


async def test_a_close_with_sessions_to_drain_fails_with_an_open_that_waited_out_the_lock(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close with a session to drain waits for an entry's open held up by the lock another
    store creates the tables under; when that open waits out the lock timeout, the close fails with
    its error, having opened the storage once, not again to wait out the lock timeout a second time
    before failing alike."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    opens = count_opens(store, monkeypatch)
    attach_undrained(store, "undrained")
    with _creation_locked(dsn), trio.fail_after(REAL_DEADLINE):
        failure = await close_during_entry(store)
    assert opens == [1]
    assert failure is not None
    assert failure.code == "STORAGE_ERROR"
    assert "another transaction holds the lock they are created under" in str(failure)


async def test_a_close_with_sessions_to_drain_fails_with_a_read_only_open_that_waited_out_a_lock(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a ``create=False`` store's open whose schema read waits out a lock on the tables (a
    ``LOCK TABLE``) fails the draining close with its error, the storage opened once: the close does
    not open it again to wait out the lock timeout a second time."""
    import psycopg

    monkeypatch.setattr(readers, "_READ_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    async with PostgresStore(dsn, schema=schema):
        pass  # the tables, to read
    store = PostgresStore(dsn, schema=schema, create=False)
    opens = count_opens(store, monkeypatch)
    attach_undrained(store, "undrained")
    with psycopg.connect(dsn) as locker, trio.fail_after(REAL_DEADLINE):
        locker.execute(f'LOCK TABLE "{schema}".retinue_meta IN ACCESS EXCLUSIVE MODE')
        failure = await close_during_entry(store)
        locker.rollback()
    assert opens == [1]
    assert failure is not None
    assert failure.code == "TABLE_LOCKED"
    assert f'"{schema}".retinue_meta' in str(failure)


@contextmanager
def _meta_locked(dsn: str, schema: str) -> Iterator[None]:
    """Hold an exclusive lock on the table a ``create=False`` open reads the schema version from."""
    import psycopg

    with psycopg.connect(dsn) as locker:
        locker.execute(f'LOCK TABLE "{schema}".retinue_meta IN ACCESS EXCLUSIVE MODE')
        yield
        locker.rollback()


async def test_a_deadline_ends_a_read_only_postgres_open_waiting_for_a_lock_on_its_tables(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``create=False`` entry whose schema read waits for another connection's exclusive lock on
    ``retinue_meta`` ends with the deadline around it, as an open waiting for the creation lock
    does, not after waiting out the whole read lock timeout in one statement to fail
    ``STORAGE_ERROR``. Once the lock is gone the store opens."""
    monkeypatch.setattr(readers, "_READ_LOCK_TIMEOUT_MS", 5_000)
    dsn, schema = postgres_schema
    async with PostgresStore(dsn, schema=schema):
        pass  # the tables, to read
    with _meta_locked(dsn, schema), trio.move_on_after(DEADLINE) as deadline:
        await _enter_and_leave(PostgresStore(dsn, schema=schema, create=False))
    assert deadline.cancelled_caught
    with trio.fail_after(REAL_DEADLINE):
        await _enter_and_leave(PostgresStore(dsn, schema=schema, create=False))


async def test_a_read_only_postgres_open_waiting_out_a_lock_on_its_tables_names_the_table(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``create=False`` open whose schema read waits out the read lock timeout on an exclusive
    lock of ``retinue_meta`` fails ``TABLE_LOCKED`` naming that table and the lock's holder, as a
    read meeting such a lock does, not ``STORAGE_ERROR`` saying only that the tables are locked."""
    monkeypatch.setattr(readers, "_READ_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    async with PostgresStore(dsn, schema=schema):
        pass
    with (
        _meta_locked(dsn, schema),
        trio.fail_after(REAL_DEADLINE),
        pytest.raises(StoreError) as caught,
    ):
        await _enter_and_leave(PostgresStore(dsn, schema=schema, create=False))
    assert caught.value.code == "TABLE_LOCKED"
    assert f'"{schema}".retinue_meta (AccessExclusiveLock by pid' in str(caught.value)
    assert "waited for 0.3 s" in str(caught.value)


async def test_a_close_ends_a_read_only_postgres_entry_waiting_for_a_lock_on_its_tables(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a ``create=False`` entry whose schema read waits for another connection's exclusive
    lock on ``retinue_meta`` ends when the store closes with nothing to drain, refused
    ``STORE_CLOSED``, not after waiting out the read lock timeout to be refused
    ``STORAGE_ERROR``."""
    monkeypatch.setattr(readers, "_READ_LOCK_TIMEOUT_MS", 5_000)
    dsn, schema = postgres_schema
    async with PostgresStore(dsn, schema=schema):
        pass
    store = PostgresStore(dsn, schema=schema, create=False)
    refusals: list[str] = []
    with _meta_locked(dsn, schema), trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(enter_noting_refusal, store, refusals)
            await trio.sleep(DEADLINE)  # real seconds: the entry waits in its worker thread
            await store.aclose()
    assert refusals == ["STORE_CLOSED"]
