"""SQLiteStore: segments left by a session row deleted by hand never collide with a new session."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from retinue.session import Session
from retinue.stores import SQLiteStore
from tests.stores._kit import lines, run_turn


def _delete_row_by_hand(path: Path, session_id: str) -> list[tuple[int, int]]:
    """Delete *session_id*'s row as the ``sqlite3`` shell does (foreign keys off); the
    ``(sid, first_seq)`` of every segment left behind."""
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        orphans = conn.execute("SELECT sid, first_seq FROM segments ORDER BY 1, 2").fetchall()
    conn.close()
    return orphans


async def _store_a_turn(store: SQLiteStore, session_id: str) -> Session:
    """A new session of one turn, stored and detached."""
    session = Session.create(session_id)
    store.attach_new(session)
    run_turn(session)
    await store.detach(session)
    return session


async def test_sqlite_new_sessions_are_stored_past_a_deleted_rows_segments(
    tmp_path: Path,
) -> None:
    """R11.5: a session row deleted by hand leaves its segments, whose sid a new session
    used to be given; each of its flushes then failed on the segments' key, and so did
    every later new session's, while nothing of theirs was stored. Now each new session is
    stored whole, and the orphaned segments stay as they were."""
    path = tmp_path / "sessions.db"
    async with SQLiteStore(path) as store:
        for session_id in ("kept", "deleted"):
            await _store_a_turn(store, session_id)
    orphans = _delete_row_by_hand(path, "deleted")
    written: list[Session] = []
    for session_id in ("first", "second", "third"):
        async with SQLiteStore(path) as store:
            written.append(await _store_a_turn(store, session_id))
    async with SQLiteStore(path) as store:
        for session in written:
            loaded = await store.load(session.id)
            assert lines(loaded.events) == lines(session.events)
        assert (await store.load("kept")).id == "kept"
    with sqlite3.connect(path) as conn:
        kept = conn.execute("SELECT sid, first_seq FROM segments ORDER BY 1, 2").fetchall()
    conn.close()
    assert set(orphans) <= set(kept)
