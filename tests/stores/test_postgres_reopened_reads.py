"""A PostgresStore's reads across a close whose cancel lands after the storage reopened."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import retinue.stores._pgsocket as sockets
from retinue._errors import StoreError
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import REAL_DEADLINE

pytestmark = pytest.mark.postgres

_LANDED = 0.3
"""Real seconds a sent cancel is given to interrupt the statement it reaches."""


@contextlib.contextmanager
def _held_cancels(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Hold back the cancels a close sends until the event yielded is set; wait for them at the
    end. A cancel travels on a connection of its own, so it may land well after the close."""
    real_cancel = sockets._cancel
    go = threading.Event()
    sent: list[threading.Event] = []

    def held_cancel(conn: Any) -> None:
        done = threading.Event()
        sent.append(done)
        go.wait(REAL_DEADLINE)
        real_cancel(conn)
        done.set()

    monkeypatch.setattr(sockets, "_cancel", held_cancel)
    yield go
    go.set()
    for done in sent:
        done.wait(REAL_DEADLINE)


@contextlib.contextmanager
def _table_locked(dsn: str, schema: str) -> Iterator[Callable[[], None]]:
    """Hold the sessions table in another connection's ``LOCK TABLE`` (every read waits);
    yields the function that ends the lock."""
    import psycopg

    with psycopg.connect(dsn) as locker:
        locker.execute(f'LOCK TABLE "{schema}".retinue_sessions IN ACCESS EXCLUSIVE MODE')
        try:
            yield locker.rollback
        finally:
            locker.rollback()


def _in_thread(backend: PostgresBackend, outcomes: list[str]) -> threading.Thread:
    """A thread asking *backend* whether a session is stored, recording how that ended."""

    def run() -> None:
        try:
            outcomes.append(f"stored: {backend.contains('some-session')}")
        except StoreError as exc:
            outcomes.append(str(exc.code))
        except Exception as exc:  # the outcome checked: no error of the driver's may escape
            outcomes.append(type(exc).__name__)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _waiting(dsn: str, schema: str) -> None:
    """Return once a read waits on the lock of the sessions table (a ``LOCK TABLE``)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as watcher:
        for _ in range(int(REAL_DEADLINE / 0.01)):
            row = watcher.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = to_regclass(%s)",
                (f'"{schema}".retinue_sessions',),
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)  # noqa: TID251 - a plain thread polling the server, no trio here
    raise AssertionError("no read came to wait on the table lock")


def test_a_read_the_close_cancelled_after_a_reopen_is_refused_store_closed(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read under way when the storage closes, whose cancel lands once it has opened again (an
    entry that failed released it, the next one reopened it), is refused ``STORE_CLOSED`` as one the
    close cancelled, not with the driver's QueryCanceled escaping raw."""
    dsn, schema = postgres_schema
    backend = PostgresBackend(dsn, schema=schema)
    backend.open()
    outcomes: list[str] = []
    with _held_cancels(monkeypatch) as send_cancels, _table_locked(dsn, schema):
        reading = _in_thread(backend, outcomes)
        _waiting(dsn, schema)
        backend.close()
        backend.open()
        send_cancels.set()
        reading.join(REAL_DEADLINE)
    backend.close()
    assert outcomes == ["STORE_CLOSED"]


def test_a_cancel_landing_after_a_reopen_spares_the_next_read(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read under way when the storage closes that ends well before the close's cancel lands, the
    storage opened again meanwhile, does not pool its connection again: the next read runs on
    another one, and the late cancel ends nothing, where a pooled connection would end the next read
    with a raw QueryCanceled."""
    dsn, schema = postgres_schema
    backend = PostgresBackend(dsn, schema=schema)
    backend.open()
    first: list[str] = []
    second: list[str] = []
    with _held_cancels(monkeypatch) as send_cancels:
        with _table_locked(dsn, schema) as unlock:
            reading = _in_thread(backend, first)
            _waiting(dsn, schema)
            backend.close()
            backend.open()
            unlock()
            reading.join(REAL_DEADLINE)
        with _table_locked(dsn, schema) as unlock:
            reading = _in_thread(backend, second)
            _waiting(dsn, schema)
            send_cancels.set()
            time.sleep(_LANDED)  # noqa: TID251 - real seconds for the server to deliver it
            unlock()
            reading.join(REAL_DEADLINE)
    backend.close()
    assert first == ["stored: False"]
    assert second == ["stored: False"]
