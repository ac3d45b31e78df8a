"""Opening an SQLite store whose database file another connection holds locked."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from retinue.session import Session
from retinue.stores import SQLiteStore
from retinue.stores._sqlite import SQLiteBackend
from tests.stores._kit import (
    REAL_DEADLINE,
    attach_undrained,
    close_during_entry,
    count_opens,
    enter_noting_refusal,
    lines,
    run_turn,
)

DEADLINE = 0.5
"""Real seconds: the open waits in a worker thread, which a virtual clock would race ahead."""


async def test_a_deadline_ends_an_open_waiting_for_another_connections_lock(
    tmp_path: Path,
) -> None:
    """An open waiting for the lock of another connection on the database file (a new file whose
    creator is still writing it) ends with the deadline around it, not after SQLite's 30 s busy
    timeout; once the lock is gone the store opens as new."""
    database = tmp_path / "sessions.db"
    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        start = trio.current_time()
        with trio.move_on_after(DEADLINE) as deadline:
            async with SQLiteStore(database):
                pass
        waited = trio.current_time() - start
    finally:
        holder.close()
    assert deadline.cancelled_caught
    assert waited < DEADLINE + 5
    session = Session.create("after-the-lock")
    run_turn(session)
    with trio.fail_after(REAL_DEADLINE):
        async with SQLiteStore(database) as store:
            store.attach_new(session)
        async with SQLiteStore(database) as store:
            assert lines((await store.load(session.id)).events) == lines(session.events)


async def test_a_close_ends_an_entry_waiting_for_another_connections_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: an entry whose open waits for another connection's lock on the database file ends when
    the store closes, refused ``STORE_CLOSED``, rather than waiting on, in its short attempts, for
    the whole 30 s busy timeout to be refused only then."""
    database = tmp_path / "sessions.db"
    store = SQLiteStore(database)
    backend = store._backend
    assert isinstance(backend, SQLiteBackend)
    waiting = threading.Event()
    real_prepare = backend._prepare

    def prepare(conn: sqlite3.Connection) -> None:
        waiting.set()
        real_prepare(conn)

    monkeypatch.setattr(backend, "_prepare", prepare)
    refusals: list[str] = []

    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        # Real seconds, a small part of the busy timeout: the open waits in a worker thread.
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(enter_noting_refusal, store, refusals)
                await trio.to_thread.run_sync(waiting.wait, REAL_DEADLINE)
                await store.aclose()
    finally:
        holder.close()
    assert refusals == ["STORE_CLOSED"]


async def test_a_close_with_sessions_to_drain_drains_through_the_entrys_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close with a session to drain while an entry's open waits for another
    connection's lock lets that open finish and drains through it, opening the storage
    once; it cut the open short and opened the storage again itself."""
    database = tmp_path / "sessions.db"
    store = SQLiteStore(database)
    opens = count_opens(store, monkeypatch)
    session = attach_undrained(store, "drained")
    refusals: list[str] = []

    holder = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    let_go = threading.Timer(0.5, holder.rollback)  # once the close has begun
    try:
        with trio.fail_after(REAL_DEADLINE):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(enter_noting_refusal, store, refusals)
                await trio.testing.wait_all_tasks_blocked()
                let_go.start()
                await store.aclose()
    finally:
        let_go.cancel()
        holder.close()
    assert refusals == ["STORE_CLOSED"]
    assert opens == [1]
    async with SQLiteStore(database) as again:
        assert lines((await again.inspect(session.id)).events) == lines(session.events)


async def test_a_close_with_sessions_to_drain_fails_with_an_open_that_waited_out_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close with a session to drain waits for an entry's open held up by another
    connection's lock on the database file; when that open waits out the busy timeout, the close
    fails with its error, having opened the storage once, not again to wait out the busy timeout a
    second time before failing alike."""
    import retinue.stores._sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "_BUSY_TIMEOUT_MS", 300)
    database = tmp_path / "sessions.db"
    store = SQLiteStore(database)
    opens = count_opens(store, monkeypatch)
    attach_undrained(store, "undrained")
    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with trio.fail_after(REAL_DEADLINE):
            failure = await close_during_entry(store)
    finally:
        holder.close()
    assert opens == [1]
    assert failure is not None
    assert failure.code == "STORAGE_ERROR"
    assert "busy timeout" in str(failure)
