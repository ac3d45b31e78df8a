"""The PostgreSQL store's reader pool ends a read that a close crossed, without a server:
its connections are stand-ins that record what is asked of them (R11.6)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from retinue._errors import StoreError
from retinue.stores._pgreaders import IDLE_SECONDS, ReaderPool

psycopg = pytest.importorskip("psycopg")


class _Connection:
    """What a reader connection is asked in these tests, and no more."""

    def __init__(self) -> None:
        self.broken = False
        self.closed = False

    def execute(self, _statement: str) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def cancel_safe(self, timeout: float) -> None:
        return None


_opened: list[ReaderPool] = []


@pytest.fixture(autouse=True)
def _close_pools() -> Iterator[None]:
    """Close the pools a test opened: each runs a shedding thread until closed."""
    yield
    while _opened:
        _opened.pop().close()


def _pool() -> ReaderPool:
    pool = ReaderPool("s", _Connection)  # type: ignore[arg-type]
    pool.open(_Connection())  # type: ignore[arg-type]
    _opened.append(pool)
    return pool


def test_a_read_a_close_cut_is_not_tried_again_though_the_pool_reopened() -> None:
    """R11.6: a pooled connection a close cut (the pool opened again since) ends its read
    ``STORE_CLOSED``; the read is not tried again on a new connection, going on as if no close had
    come."""
    pool = _pool()
    calls: list[Any] = []

    def read(conn: Any) -> str:
        calls.append(conn)
        if len(calls) == 1:
            pool.close()
            pool.open()
            conn.broken = True
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        pool.read_goes_on(conn)
        return "read went on"

    with pytest.raises(StoreError) as refused:
        pool.run(read)
    assert refused.value.code == "STORE_CLOSED"
    assert len(calls) == 1


def test_a_read_goes_on_between_attempts_until_a_close_crosses_it() -> None:
    """R11.6: between two lock attempts a read goes on while no close came since its
    connection was taken, and ends ``STORE_CLOSED`` once one did, reopened or not."""
    pool = _pool()
    outcomes: list[str] = []

    def read(conn: Any) -> None:
        pool.read_goes_on(conn)
        outcomes.append("went on")
        pool.close()
        pool.open()
        pool.read_goes_on(conn)

    with pytest.raises(StoreError) as refused:
        pool.run(read)
    assert refused.value.code == "STORE_CLOSED"
    assert outcomes == ["went on"]


def _concurrent(pool: ReaderPool, reads: int) -> None:
    """*reads* reads running at once, each on a connection of its own (each runs the next)."""

    def reading(depth: int) -> Callable[[Any], None]:
        def read(_conn: Any) -> None:
            if depth:
                pool.run(reading(depth - 1))

        return read

    pool.run(reading(reads - 1))


def _counting_pool(clock: Callable[[], float]) -> tuple[ReaderPool, list[_Connection]]:
    made: list[_Connection] = []

    def connect() -> _Connection:
        made.append(_Connection())
        return made[-1]

    pool = ReaderPool("s", connect, clock=clock)  # type: ignore[arg-type]
    pool.open()
    _opened.append(pool)
    return pool, made


def test_a_steady_load_of_many_concurrent_reads_keeps_its_connections() -> None:
    """Twelve reads at once, again and again: the pool makes twelve connections, then none."""
    pool, made = _counting_pool(lambda: 0.0)
    for _ in range(10):
        _concurrent(pool, 12)
    assert len(made) == 12
    assert not any(conn.closed for conn in made)
    assert len(pool.readers) == 12


def test_connections_a_burst_opened_are_closed_once_unused_for_the_idle_age() -> None:
    """After a burst of twelve, a load of two goes on: once the idle age has passed, the ten
    it left unused are closed, the two it uses kept."""
    now = [0.0]
    pool, made = _counting_pool(lambda: now[0])
    _concurrent(pool, 12)
    now[0] = IDLE_SECONDS - 1
    _concurrent(pool, 2)
    pool.shed_idle()
    assert len(pool.readers) == 12
    now[0] = IDLE_SECONDS + 1
    pool.shed_idle()
    assert len(made) == 12
    assert len(pool.readers) == 2
    assert all(not conn.closed for conn in pool.readers)  # type: ignore[attr-defined]
    assert sum(conn.closed for conn in made) == 10
