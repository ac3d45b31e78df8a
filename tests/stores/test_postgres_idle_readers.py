"""PostgresStore's reader connections: after a burst of concurrent reads the store keeps no more
idle ones than its bound, on the server as in its pool."""

from __future__ import annotations

import pytest
import trio

from retinue.stores import PostgresStore
from retinue.stores._pgreaders import IDLE_READERS
from tests.stores._kit import REAL_DEADLINE
from tests.stores._postgres_locks_kit import backend_of, store_session

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


async def test_postgres_a_burst_of_loads_leaves_few_idle_reader_connections(
    postgres_schema: tuple[str, str],
) -> None:
    """Loads held up together (a table lock, then let go) each read on a connection of their
    own; once done, the store keeps ``IDLE_READERS`` of them and the server runs no more."""
    import psycopg

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
            assert len(pool.readers) == IDLE_READERS
            for _ in range(50):  # a closed connection's backend exits soon after
                if _server_connections(dsn, sorted(used)) == IDLE_READERS:
                    break
                await trio.sleep(0.1)
            assert _server_connections(dsn, sorted(used)) == IDLE_READERS
