"""SQLiteStore reads: one snapshot per read, a database file, never an in-memory one, and
integer columns that hold something else."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retinue._errors import ConfigError, CorruptSessionError, StoreError
from retinue.session import Session
from retinue.stores import SQLiteStore
from retinue.stores._backend import AppendBatch
from retinue.stores._sqlite import SQLiteBackend
from tests.stores._kit import run_turn


class _CommitBeforeSegments:
    """A reader connection that runs *commit* (once) just before the segments are queried."""

    def __init__(self, conn: sqlite3.Connection, commit: Callable[[], None]) -> None:
        self._conn = conn
        self._commit: Callable[[], None] | None = commit

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if "FROM segments" in sql and self._commit is not None:
            commit, self._commit = self._commit, None
            commit()
        return self._conn.execute(sql, *args)

    def close(self) -> None:
        self._conn.close()


def test_sqlite_read_is_one_snapshot_while_a_commit_lands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5, R11.8: a commit between the session row and its segments is not a seq gap."""
    path = tmp_path / "sessions.db"
    session = Session.create("live")
    run_turn(session)
    writer = SQLiteBackend(path)
    writer.open()
    first = tuple(session.events)
    writer.write([AppendBatch("live", 0, first, header=session.header)])
    run_turn(session)
    rest = tuple(session.events[len(first) :])

    def commit() -> None:
        [refused] = writer.write([AppendBatch("live", len(first), rest)])
        assert refused is None

    reader = SQLiteBackend(path, create=False)
    connect = reader._connect
    monkeypatch.setattr(reader, "_connect", lambda: _CommitBeforeSegments(connect(), commit))
    try:
        log = reader.read("live")
        assert log is not None
        assert len(log.records) == len(first)  # the snapshot from before the commit
        log = reader.read("live")  # the reader connection is back in autocommit mode
        assert log is not None
        assert len(log.records) == len(session.events)
    finally:
        reader.close()
        writer.close()


@pytest.mark.parametrize("path", [":memory:", ""])
@pytest.mark.parametrize("create", [True, False])
def test_sqlite_in_memory_path_is_refused_at_construction(path: str, create: bool) -> None:
    """Each connection would open its own empty in-memory database: refused, pointing to MemoryStore."""
    with pytest.raises(ConfigError) as caught:
        SQLiteStore(path, create=create)
    assert "MemoryStore" in caught.value.message
    assert caught.value.code == "INVALID_STORE_PATH"


def _rows(path: Path) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        return (
            conn.execute("SELECT * FROM sessions").fetchall()
            + conn.execute("SELECT * FROM segments ORDER BY sid, first_seq").fetchall()
        )


async def _two_turns(path: Path, session_id: str) -> Session:
    """Store two turns of *session_id*, one segment row each; return the session."""
    session = Session.create(session_id)
    async with SQLiteStore(path) as store:
        store.attach_new(session)
        for _ in range(2):
            run_turn(session)
            await store.flush(session)
        await store.detach(session)
    return session


@pytest.mark.parametrize(
    ("assignment", "column", "value"),
    [
        ("sessions SET next_seq = 'abc'", "sessions.next_seq", "abc"),
        ("sessions SET next_seq = 12.5", "sessions.next_seq", 12.5),
        ("segments SET first_seq = 'x' WHERE first_seq > 0", "segments.first_seq", "x"),
        ("segments SET first_seq = 44.5 WHERE first_seq > 0", "segments.first_seq", 44.5),
        (
            "segments SET count = 'abc' WHERE first_seq = 0",
            "segments.count of the segment from seq 0",
            "abc",
        ),
        (
            "segments SET count = X'01' WHERE first_seq = 0",
            "segments.count of the segment from seq 0",
            b"\x01",
        ),
    ],
    ids=[
        "next_seq text",
        "next_seq real",
        "first_seq text",
        "first_seq real",
        "count text",
        "count blob",
    ],
)
async def test_sqlite_integer_column_holding_something_else_is_a_corrupt_session(
    tmp_path: Path, assignment: str, column: str, value: object
) -> None:
    """R11.8: SQLite keeps any value in an INTEGER column; a seq or count that is not an
    integer makes load, inspect and an append fail with a CorruptSessionError naming the
    session, the column and the value (not a raw TypeError or a made-up seq gap), and no
    row is changed."""
    path = tmp_path / "sessions.db"
    await _two_turns(path, "s1")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE {assignment}")
    before = _rows(path)
    expected = f"session 's1': {column} holds {value!r}, not an integer"
    async with SQLiteStore(path) as store:
        for read in (store.load, store.inspect):
            with pytest.raises(CorruptSessionError) as caught:
                await read("s1")
            assert (caught.value.message, caught.value.code) == (expected, "CORRUPT_SESSION")
    assert _rows(path) == before


async def test_sqlite_append_to_a_session_whose_next_seq_is_not_an_integer_names_it(
    tmp_path: Path,
) -> None:
    """R11.5: an append checks the stored next seq; one that is not an integer fails the flush
    naming the session, the column and the value, and nothing is written."""
    path = tmp_path / "sessions.db"
    session = await _two_turns(path, "s1")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE sessions SET next_seq = 'abc'")
    before = _rows(path)
    store = SQLiteStore(path)
    store.attach(session)
    run_turn(session)
    with pytest.raises(StoreError) as caught:
        await store.flush(session)
    with pytest.raises(StoreError, match="could not be drained"):
        await store.aclose()  # the events stay buffered: closing cannot write them either
    assert "sessions.next_seq holds 'abc', not an integer" in caught.value.message
    assert caught.value.code == "CORRUPT_SESSION"
    assert _rows(path) == before


@pytest.mark.parametrize(
    "edit",
    [
        "DELETE FROM segments",
        "DELETE FROM segments WHERE first_seq > 0",
        "UPDATE sessions SET next_seq = next_seq + 5",
    ],
    ids=["every-segment-deleted", "the-last-segment-deleted", "next-seq-raised"],
)
async def test_sqlite_append_after_segments_changed_by_hand_is_refused(
    tmp_path: Path, edit: str
) -> None:
    """R11.4, R11.8: an append checks that the last stored segment ends at the stored next seq;
    after segments deleted by hand (or a next seq raised) the flush fails CORRUPT_SESSION naming
    both, and nothing is written, where it stored its events after a gap no load reads past."""
    path = tmp_path / "sessions.db"
    session = await _two_turns(path, "s1")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(edit)
        [(end, next_seq)] = conn.execute(
            "SELECT (SELECT coalesce(max(first_seq + count), 0) FROM segments), next_seq "
            "FROM sessions"
        ).fetchall()
    assert end != next_seq
    before = _rows(path)
    store = SQLiteStore(path)
    store.attach(session)
    run_turn(session)
    with pytest.raises(StoreError) as caught:
        await store.flush(session)
    with pytest.raises(StoreError, match="could not be drained"):
        await store.aclose()
    assert caught.value.code == "CORRUPT_SESSION"
    assert caught.value.message == (
        f"session 's1': its stored segments end at seq {end} but sessions.next_seq says "
        f"{next_seq} (changed by hand): nothing is appended to it"
    )
    assert _rows(path) == before
