"""SQLiteStore reads: one snapshot per read, and a database file, never an in-memory one."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retinue._errors import ConfigError
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
