"""PostgresStore's lock connection keeps its claims while idle: the server's idle timeouts do
not end it, and claims it lost with a drop by the server are retaken without a write, or the
writes they refuse say why."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import REAL_DEADLINE, run_turn
from tests.stores._postgres_locks_kit import (
    backend_of,
    drop_lock_connection,
    drops_noticed_by_use_only,
    store_session,
)

pytestmark = pytest.mark.postgres


def _advisory_locks(dsn: str, pid: int) -> int:
    """How many advisory locks the server's backend *pid* holds."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (pid,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _locker_pid(store: PostgresStore) -> int:
    locker = backend_of(store)._claims._locker
    assert locker is not None
    return locker.info.backend_pid


async def _drop_and_await_retaken(dsn: str, store: PostgresStore) -> None:
    """End the store's lock connection in the server; wait until a new one holds both claims."""
    dropped = _locker_pid(store)
    drop_lock_connection(dsn, store)
    for _ in range(50):
        await trio.sleep(0.1)
        if _locker_pid(store) != dropped and _advisory_locks(dsn, _locker_pid(store)):
            break
    assert _advisory_locks(dsn, _locker_pid(store)) == 2


async def _refusals(other: PostgresStore, live: str, new: str) -> tuple[str | None, ...]:
    """The codes of *other*'s refusals to load the *live* session and to claim the *new* id,
    both claimed by another store: each must be refused."""
    with pytest.raises(StoreError) as load:
        await other.load(live)
    with pytest.raises(StoreError) as claim:
        await other.claim_new(new)
    return load.value.code, claim.value.code


async def _live_pair(store: PostgresStore, session_id: str) -> Session:
    """A session of *store* flushed and attached, and an id claimed as new, ``"new"``."""
    session = Session.create(session_id)
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    await store.claim_new("new")
    return session


async def test_postgres_claims_outlive_an_idle_session_timeout_in_the_dsn(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a DSN asking the server to end idle sessions after 1 s does not end the lock
    connection: after 2.5 s idle the same backend holds both claims, and another store's
    load of the live session and ``claim_new`` of the id claimed as new are refused."""
    dsn, schema = postgres_schema
    timing_out = f"{dsn}?options=-c%20idle_session_timeout%3D1000"
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(timing_out, schema=schema) as store:
            session = await _live_pair(store, "idle")
            pid = _locker_pid(store)
            await trio.sleep(2.5)
            assert _locker_pid(store) == pid
            assert _advisory_locks(dsn, pid) == 2
            async with PostgresStore(dsn, schema=schema) as other:
                refusals = await _refusals(other, "idle", "new")
                assert refusals == ("SESSION_LOCKED", "SESSION_ALREADY_EXISTS")
            run_turn(session)
            await store.flush(session)


async def test_postgres_claims_of_a_dropped_lock_connection_are_retaken_while_idle(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a lock connection the server ended (a restart, pg_terminate_backend) is remade
    and its claims retaken within seconds, no write needed: the new backend holds both, and
    another store's load of the live session and ``claim_new`` of the id claimed as new are
    refused."""
    dsn, schema = postgres_schema
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            session = await _live_pair(store, "dropped")
            await _drop_and_await_retaken(dsn, store)
            async with PostgresStore(dsn, schema=schema) as other:
                refusals = await _refusals(other, "dropped", "new")
                assert refusals == ("SESSION_LOCKED", "SESSION_ALREADY_EXISTS")
            run_turn(session)
            await store.flush(session)


@contextlib.contextmanager
def _descriptors_taken_below(high: int) -> Iterator[None]:
    """Hold every free descriptor below *high* open, so the next ones opened lie past it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < high + 100:
        pytest.skip(f"the hard limit of open files ({hard}) is below {high + 100}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, high + 100), hard))
    held: list[int] = []
    try:
        while (fd := os.open(os.devnull, os.O_RDONLY)) < high:
            held.append(fd)
        os.close(fd)
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_postgres_a_lock_connection_past_descriptor_1023_is_watched_too(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: in a process with over a thousand open files (a busy service), a dropped lock
    connection's claims are retaken without a write all the same: ``select()`` refuses such
    a descriptor, and the watcher stopped at its first look."""
    dsn, schema = postgres_schema
    with trio.fail_after(REAL_DEADLINE), _descriptors_taken_below(1100):
        async with PostgresStore(dsn, schema=schema) as store:
            await _live_pair(store, "high")
            locker = backend_of(store)._claims._locker
            assert locker is not None
            assert locker.fileno() > 1023
            await _drop_and_await_retaken(dsn, store)


async def test_postgres_a_claim_taken_elsewhere_after_a_drop_fails_writes_saying_so(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a session whose claim went with a dropped lock connection, and another store
    took before it was retaken, has its flush refused ``SESSION_LOCKED`` saying the lock
    connection was lost and another process claimed the session; a new session claimed here
    (``claim_new``) and taken so is refused as much, not as a duplicate create."""
    drops_noticed_by_use_only(monkeypatch)
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stored")
    created = Session.create("created")
    async with PostgresStore(dsn, schema=schema) as store:
        stored = await store.load("stored")
        store.attach(stored)
        await store.claim_new("created")
        store.attach_new(created)
        drop_lock_connection(dsn, store)
        async with PostgresStore(dsn, schema=schema) as other:
            other.attach(await other.load("stored"))
            await other.claim_new("created")
            for session in (stored, created):
                run_turn(session)
                with pytest.raises(StoreError) as refused:
                    await store.flush(session)
                assert refused.value.code == "SESSION_LOCKED"
                assert "lock connection" in refused.value.message
                assert "another process claimed the session" in refused.value.message
                store._tracked.pop(session.id).unsubscribe()  # refused: nothing left to drain
            await other.release_new("created")
