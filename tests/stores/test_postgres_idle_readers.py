"""PostgresStore's reader connections: after a burst of concurrent reads, a store gone quiet
closes them once unused for the idle age, on the server as in its pool."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio

from retinue.stores import PostgresStore, _pgreaders
from tests.stores._kit import REAL_DEADLINE
from tests.stores._postgres_locks_kit import backend_of, drop_lock_connection, store_session

pytestmark = pytest.mark.postgres

_BURST = 20


def _server_connections(dsn: str, pids: list[int]) -> int:
    """How many of the server's backends *pids* still run."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_postgres_a_quiet_store_closes_the_reader_connections_of_a_burst(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loads held up together (a table lock, then let go) each read on a connection of their
    own; once the store has read nothing for the idle age, it keeps none of them and the
    server runs none."""
    import psycopg

    monkeypatch.setattr(_pgreaders, "IDLE_SECONDS", 1.0)
    dsn, schema = postgres_schema
    ids = [f"s{index}" for index in range(_BURST)]
    for session_id in ids:
        await store_session(dsn, schema, session_id)
    with trio.fail_after(REAL_DEADLINE), psycopg.connect(dsn) as blocker:
        async with PostgresStore(dsn, schema=schema) as store:
            pool = backend_of(store)._pool
            blocker.execute(f'LOCK TABLE "{schema}".retinue_segments IN ACCESS EXCLUSIVE MODE')
            used: set[int] = set()

            async def load(session_id: str) -> None:
                loaded = await store.load(session_id)
                await store.detach(loaded)

            async with trio.open_nursery() as nursery:
                for session_id in ids:
                    nursery.start_soon(load, session_id)
                for _ in range(100):
                    await trio.sleep(0.05)
                    used.update(conn.info.backend_pid for conn in list(pool._busy))
                    if len(pool._busy) == _BURST:
                        break
                blocker.rollback()
            assert len(used) >= _BURST
            assert len(pool.readers) >= _BURST
            for _ in range(100):  # the age, a tick, then a closed connection's backend exits
                if not pool.readers and _server_connections(dsn, sorted(used)) == 0:
                    break
                await trio.sleep(0.1)
            assert not pool.readers
            assert _server_connections(dsn, sorted(used)) == 0


async def test_postgres_idle_readers_are_closed_while_the_lock_connection_is_being_made_again(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server drops the lock connection of a store holding a claim, and the new one it
    makes waits for a server that does not answer: the store's idle reader connection is
    closed once unused for the idle age all the same, not when the lock connection is made."""
    monkeypatch.setattr(_pgreaders, "IDLE_SECONDS", 1.0)
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stored")
    unanswered = threading.Event()
    connecting = threading.Event()
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            loaded = await store.load("stored")
            claims = backend_of(store)._claims
            connect = claims._connect

            def connect_unanswered(**params: Any) -> Any:
                connecting.set()
                unanswered.wait(REAL_DEADLINE)
                return connect(**params)

            claims._connect = connect_unanswered
            try:
                pool = backend_of(store)._pool
                assert pool.readers
                drop_lock_connection(dsn, store)
                assert await trio.to_thread.run_sync(connecting.wait, REAL_DEADLINE)
                for _ in range(50):
                    if not pool.readers:
                        break
                    await trio.sleep(0.1)
                assert not pool.readers
            finally:
                unanswered.set()
            await store.detach(loaded)


def _store_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("retinue-")]


async def test_postgres_a_closed_store_leaves_none_of_its_threads_running(
    postgres_schema: tuple[str, str],
) -> None:
    """A store's threads (the claims watcher, the readers' shedder) run while it is open and
    are ended by its close, however many times it is opened."""
    dsn, schema = postgres_schema
    before = _store_threads()
    with trio.fail_after(REAL_DEADLINE):
        for _ in range(3):
            async with PostgresStore(dsn, schema=schema) as store:
                await store.list()
                running = _store_threads()
                assert "retinue-postgres-readers" in running
                assert "retinue-postgres-claims" in running
            assert _store_threads() == before
