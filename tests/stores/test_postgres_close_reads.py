"""A PostgresStore's close ends the reads still waiting in the server, so nothing waits on them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import full_disk, run_turn

pytestmark = pytest.mark.postgres

CLOSE_BOUND = 5.0
"""Real seconds a close may take here: the read it must not wait for waits 30 s."""


@contextlib.contextmanager
def _table_locked(dsn: str, schema: str, table: str = "retinue_sessions") -> Iterator[None]:
    """Hold *table* in another connection's ``LOCK TABLE``: every read of it waits."""
    import psycopg

    with psycopg.connect(dsn) as locker:
        locker.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS EXCLUSIVE MODE')
        try:
            yield
        finally:
            locker.rollback()


async def _close_into(store: BufferedStore, scope: trio.CancelScope, outcomes: list[str]) -> None:
    try:
        with scope:
            await store.aclose()
        outcomes.append("cancelled" if scope.cancelled_caught else "ended")
    except StoreError as exc:
        outcomes.append(str(exc.code))


async def _load_into(store: BufferedStore, session_id: str, outcomes: list[str]) -> None:
    try:
        await store.load(session_id)
        outcomes.append("loaded")
    except StoreError as exc:
        outcomes.append(str(exc.code))


async def test_a_close_waiting_for_a_cancelled_one_does_not_wait_for_a_loads_blocked_read(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a load of a released session checking its stored id while a ``LOCK TABLE`` holds the
    read: a close cancelled meanwhile releases the storage, which ends the read (the load is refused
    ``STORE_CLOSED``), and a close waiting for the cancelled one raises ``CLOSE_FAILED`` at once,
    not after the read's lock timeout (30 s)."""
    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    session = Session.create("released")
    run_turn(session)
    loads: list[str] = []
    closes: list[str] = []
    async with store:
        store.attach_new(session)
        with monkeypatch.context() as patched:
            patched.setattr(store._backend, "write", full_disk)
            with pytest.raises(StoreError):
                await store.detach(session)
        with _table_locked(dsn, schema), trio.fail_after(CLOSE_BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_load_into, store, session.id, loads)
                await trio.sleep(0.3)  # real seconds: its read waits on the lock in a thread
                first = trio.CancelScope()
                nursery.start_soon(_close_into, store, first, closes)
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(_close_into, store, trio.CancelScope(), closes)
                await trio.testing.wait_all_tasks_blocked()
                first.cancel()
    assert loads == ["STORE_CLOSED"]
    assert closes == ["cancelled", "CLOSE_FAILED"]


@pytest.mark.parametrize("reopened", [False, True], ids=["closed", "closed and reopened"])
async def test_a_close_ends_a_load_between_two_of_its_lock_attempts(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch, reopened: bool
) -> None:
    """R11.6: a load reads a session's rows in short lock attempts; a close landing between two of
    them (where its cancel request, sent to a statement under way, finds none) ends the load
    ``STORE_CLOSED`` rather than letting it try on until the read's lock timeout (30 s) and fail
    ``TABLE_LOCKED``. The cancel request is left out here, so only the pause between attempts can
    end the read; the segments are locked, not the sessions, so the load's claim passes and its read
    of the rows waits. A close the readers are opened again after (as a failed close's are) ends it
    too: the read does not try on."""
    from retinue.stores import _pgsocket

    monkeypatch.setattr(_pgsocket, "_cancel", lambda _conn: None)
    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    session = Session.create("stored")
    run_turn(session)
    loads: list[str] = []
    async with store:
        store.attach_new(session)
        await store.detach(session)
        with _table_locked(dsn, schema, "retinue_segments"), trio.fail_after(CLOSE_BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_load_into, store, session.id, loads)
                await trio.sleep(0.3)  # real seconds: its read waits on the lock in a thread
                backend: Any = store._backend
                backend._pool.close()  # the close of the store's readers
                if reopened:
                    backend._pool.open()
    assert loads == ["STORE_CLOSED"]
