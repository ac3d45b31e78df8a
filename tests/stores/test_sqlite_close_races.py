"""SQLiteStore closing while a commit, a load or a read is still in a worker thread."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import SQLiteStore
from retinue.stores._backend import AppendBatch
from retinue.stores._sqlite import SQLiteBackend
from tests.stores._kit import (
    flush_refusals_as_the_exit_is_cancelled,
    lines,
    load_refusals_as_the_store_closes,
    run_turn,
    store_one_turn,
)


class _WatchedLock:
    """A lock that sets *contended* when a caller finds it held and waits for it."""

    def __init__(self, contended: threading.Event) -> None:
        self._lock = threading.Lock()
        self._contended = contended

    def __enter__(self) -> bool:
        if not self._lock.acquire(blocking=False):
            self._contended.set()
            self._lock.acquire()
        return True

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


async def _set_when(event: threading.Event, then: trio.CancelScope) -> None:
    await trio.to_thread.run_sync(event.wait)
    then.cancel()


async def _assert_free(path: Path, session_id: str, stored: list[str]) -> None:
    """Another store can load the session (*stored* first): the closed store holds no claim."""
    async with SQLiteStore(path) as other:
        loaded = await other.load(session_id)
        assert lines(loaded.events[: len(stored)]) == stored
        await other.detach(loaded)
    assert os.listdir(f"{path}.locks") == []


def _close_then_set(monkeypatch: pytest.MonkeyPatch, closed: threading.Event) -> None:
    """Make every SQLite backend set *closed* once its close is over."""
    close = SQLiteBackend.close

    def close_and_set(self: SQLiteBackend) -> None:
        close(self)
        closed.set()

    monkeypatch.setattr(SQLiteBackend, "close", close_and_set)


def _contains_waits(
    monkeypatch: pytest.MonkeyPatch, checking: threading.Event, closed: threading.Event
) -> None:
    """Make a claim's check that the session is stored return only once *closed* is set."""
    contains = SQLiteBackend.contains

    def contains_until_closed(self: SQLiteBackend, session_id: str) -> bool:
        found = contains(self, session_id)
        checking.set()
        closed.wait()
        return found

    monkeypatch.setattr(SQLiteBackend, "contains", contains_until_closed)


async def test_sqlite_store_cancelled_while_a_create_commits_leaves_its_session_unclaimed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a store whose exit is cancelled while its first commit of a session runs in the
    worker thread closes once that commit is over, and the claim the commit took goes with
    the store: other stores can then load the session."""
    path = tmp_path / "sessions.db"
    writing, contended = threading.Event(), threading.Event()
    write_one = SQLiteBackend._write_one

    def write_until_close_waits(self: SQLiteBackend, conn: Any, batch: AppendBatch) -> None:
        writing.set()
        contended.wait()  # the store's close now waits for this commit
        write_one(self, conn, batch)

    monkeypatch.setattr(SQLiteBackend, "_write_one", write_until_close_waits)
    store = SQLiteStore(path)
    monkeypatch.setattr(store._backend, "_write_lock", _WatchedLock(contended))
    session = Session.create("first")
    run_turn(session)
    with trio.CancelScope() as scope:
        async with store, trio.open_nursery() as nursery:
            store.attach_new(session)
            nursery.start_soon(_set_when, writing, scope)
            await store.flush(session)
    assert scope.cancelled_caught
    monkeypatch.setattr(SQLiteBackend, "_write_one", write_one)
    await _assert_free(path, "first", lines(session.events[:]))


async def test_sqlite_load_racing_the_close_is_refused_and_claims_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a load whose claim is still being taken when its store closes fails with
    ``STORE_CLOSED`` rather than leave the closed store holding the session."""
    path = tmp_path / "sessions.db"
    session = await store_one_turn(SQLiteStore(path), "raced")
    checking, closed = threading.Event(), threading.Event()
    _contains_waits(monkeypatch, checking, closed)
    _close_then_set(monkeypatch, closed)
    refusals = await load_refusals_as_the_store_closes(SQLiteStore(path), "raced", checking)
    assert refusals == ["STORE_CLOSED"]
    monkeypatch.undo()
    await _assert_free(path, "raced", lines(session.events[:]))


async def test_sqlite_append_racing_the_close_is_refused_and_claims_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a stored session appended to without a load is claimed by its commit; a
    commit whose claim is still being taken when its store closes (an exit cancelled) takes
    no claim for the closed store, which would hold the session until the process exits."""
    path = tmp_path / "sessions.db"
    session = await store_one_turn(SQLiteStore(path), "raced")
    stored = lines(session.events[:])
    checking, closed = threading.Event(), threading.Event()
    _contains_waits(monkeypatch, checking, closed)
    _close_then_set(monkeypatch, closed)
    refusals = await flush_refusals_as_the_exit_is_cancelled(SQLiteStore(path), session, checking)
    assert refusals == ["STORE_CLOSED"]
    monkeypatch.undo()
    await _assert_free(path, "raced", stored)


class _ListingWaitsForClose:
    """A connection whose listing query runs only once the store has closed."""

    def __init__(
        self, conn: sqlite3.Connection, listing: threading.Event, closed: threading.Event
    ) -> None:
        self._conn = conn
        self._listing = listing
        self._closed = closed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.startswith("SELECT CAST(id AS BLOB)"):
            self._listing.set()
            self._closed.wait()
        return self._conn.execute(sql, *args)


async def test_sqlite_read_in_flight_at_close_closes_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read still running when its store closes finishes, then closes its connection rather
    than keep it (and its open files on the database) in the pool of a closed store."""
    path = tmp_path / "sessions.db"
    session = Session.create("listed")
    run_turn(session)
    async with SQLiteStore(path) as store:
        store.attach_new(session)
    listing, closed = threading.Event(), threading.Event()
    made: list[sqlite3.Connection] = []
    connect = SQLiteBackend._connect

    def watched_connect(self: SQLiteBackend) -> Any:
        conn = connect(self)
        made.append(conn)
        return _ListingWaitsForClose(conn, listing, closed)

    monkeypatch.setattr(SQLiteBackend, "_connect", watched_connect)
    listed: list[list[str]] = []

    async def list_ids() -> None:
        listed.append([header.id for header in await store.list()])

    store = SQLiteStore(path)
    async with trio.open_nursery() as nursery:
        async with store:
            nursery.start_soon(list_ids)
            await trio.to_thread.run_sync(listing.wait)
        closed.set()
    assert listed == [["listed"]]
    assert len(made) == 2  # the writer and the reader
    for conn in made:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            conn.execute("SELECT 1")


async def test_sqlite_close_does_not_wait_for_a_commit_blocked_by_another_writer(
    tmp_path: Path,
) -> None:
    """A store left under a deadline while its commit waits for another connection's write
    transaction closes at once: the commit gives up (its events stay unwritten, as a drain
    cut short leaves them) rather than holding the exit until the busy timeout. The
    session's claim goes with the store, and what was committed before loads."""
    path = tmp_path / "sessions.db"
    session = Session.create("blocked")
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    # Let go in the end, so that a close that waits for the write fails rather than hangs.
    release = threading.Timer(10, blocker.rollback)
    try:
        with trio.CancelScope() as outer:
            async with SQLiteStore(path) as store:
                store.attach_new(session)
                run_turn(session)
                await store.flush(session)
                stored = lines(session.events)
                blocker.execute("BEGIN IMMEDIATE")
                run_turn(session)
                with trio.move_on_after(0.3):
                    await store.flush(session)
                release.start()
                outer.deadline = trio.current_time() + 0.5
                started = trio.current_time()
        assert trio.current_time() - started < 5
    finally:
        release.cancel()
        blocker.rollback()
        blocker.close()
    await _assert_free(path, "blocked", stored)


async def test_a_deadline_ends_a_flush_waiting_for_another_writers_transaction(
    tmp_path: Path,
) -> None:
    """R11.5: a flush committing on its own (no writer task) while another connection holds the
    write transaction ends at its deadline, its events kept buffered for the next flush, rather than
    waiting out the 30 s busy timeout to fail 'database is locked'."""
    path = tmp_path / "sessions.db"
    session = Session.create("blocked")
    store = SQLiteStore(path)
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    # Let go in the end, so that a flush that waits the busy timeout fails rather than hangs.
    release = threading.Timer(10, blocker.rollback)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        run_turn(session)
        release.start()
        started = trio.current_time()
        with trio.move_on_after(0.3) as deadline:
            await store.flush(session)
        waited = trio.current_time() - started
    finally:
        release.cancel()
        blocker.rollback()
        blocker.close()
    assert deadline.cancelled_caught
    assert waited < 5
    assert store.statistics().buffered_events == 22
    await store.flush(session)
    await store.detach(session)
    await store.aclose()
    await _assert_free(path, "blocked", lines(session.events))


@pytest.mark.parametrize("take_out", ["removed", "replaced"])
async def test_sqlite_commit_to_a_database_file_taken_out_of_place_is_refused(
    tmp_path: Path, take_out: str
) -> None:
    """R11.4: a database file removed, or replaced by a rename, under an open store is committed to
    no more: the flush fails STORAGE_ERROR naming the file, its events kept buffered, since SQLite
    would write to the file out of place without an error and the flush be acknowledged, its events
    lost with it."""
    path = tmp_path / "sessions.db"
    session = Session.create("moved")
    store = SQLiteStore(path)
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    if take_out == "removed":
        for name in (path, tmp_path / "sessions.db-wal", tmp_path / "sessions.db-shm"):
            name.unlink(missing_ok=True)
    else:
        os.replace(tmp_path / "sessions.db", tmp_path / "old.db")
        (tmp_path / "sessions.db").write_bytes(b"")
    run_turn(session, "after the file was taken out")
    with pytest.raises(StoreError) as refused:
        await store.flush(session)
    buffered = store.statistics().buffered_events
    with pytest.raises(StoreError):
        await store.aclose()
    assert refused.value.code == "STORAGE_ERROR"
    assert str(path) in refused.value.message
    assert buffered == 22
