"""Opening an SQLite store whose database file another connection holds locked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from retinue.session import Session
from retinue.stores import SQLiteStore
from tests.stores._kit import REAL_DEADLINE, lines, run_turn

DEADLINE = 0.5
"""Real seconds: the open waits in a worker thread, which a virtual clock would race ahead."""


async def test_a_deadline_ends_an_open_waiting_for_another_connections_lock(
    tmp_path: Path,
) -> None:
    """An open waiting for the lock of another connection on the database file (a new
    file whose creator is still writing it) ends with the deadline around it, where it
    waited out SQLite's 30 s busy timeout; once the lock is gone the store opens as new."""
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
