"""SQLiteStore: one writer per session across stores and processes, and rows that are not UTF-8."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio

from retinue._errors import CorruptSessionError, StoreError
from retinue.session import Session
from retinue.stores import SQLiteStore
from retinue.stores._ids import escape_id
from tests.stores._kit import lines, run_turn

LONG_IDS = ["plain", "a" * 512, "日本" * 256, "\U0001f600" * 512]


async def _stored(path: Path, *session_ids: str, turns: int = 1) -> None:
    """Store each session with *turns* turns, one flush (one segment row) per turn."""
    async with SQLiteStore(path) as store:
        for session_id in session_ids:
            session = Session.create(session_id)
            store.attach_new(session)
            for number in range(turns):
                run_turn(session, f"message {number}")
                await store.flush(session)
            await store.detach(session)


def _sql(path: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(sql, args).fetchall()


def _lock_files(path: Path) -> list[str]:
    return os.listdir(f"{path}.locks")


async def _assert_locked(store: SQLiteStore, session_id: str) -> None:
    with pytest.raises(StoreError) as caught:
        await store.load(session_id)
    assert caught.value.code == "SESSION_LOCKED"
    assert repr(session_id) in caught.value.message


# -- one writer per session (R12.7) -------------------------------------------


async def test_sqlite_second_store_cannot_load_a_claimed_session(tmp_path: Path) -> None:
    """R12.7: a session loaded by one store is SESSION_LOCKED for another until it is detached."""
    path = tmp_path / "sessions.db"
    await _stored(path, "contested")
    async with SQLiteStore(path) as first, SQLiteStore(path) as second:
        mine = await first.load("contested")
        first.attach(mine)
        await _assert_locked(second, "contested")
        run_turn(mine)
        await first.detach(mine)
        theirs = await second.load("contested")
    assert lines(theirs.events[:]) == lines(mine.events[:])


async def test_sqlite_claim_reports_running_out_of_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7, R11.5: a load that cannot open the lock file says the process ran out of files
    and how to lift the limit, and holds nothing, so a later load succeeds.
    """
    path = tmp_path / "sessions.db"
    await _stored(path, "victim")
    real = os.open

    def out_of_files(target: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if os.fspath(target).endswith("victim.lock"):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real(target, flags, mode, **kwargs)

    async with SQLiteStore(path) as store:
        monkeypatch.setattr(os, "open", out_of_files)
        with pytest.raises(StoreError) as caught:
            await store.load("victim")
        monkeypatch.undo()
        assert caught.value.code == "STORAGE_ERROR"
        for phrase in ("'victim'", "ran out of open files", "SQLite store", "ulimit -n"):
            assert phrase in caught.value.message
        assert (await store.load("victim")).last_turn == 1


async def test_sqlite_closing_a_store_drops_its_claims(tmp_path: Path) -> None:
    """R12.7: closing a store gives up every claim it holds, and removes its lock files."""
    path = tmp_path / "sessions.db"
    await _stored(path, "one", "two")
    async with SQLiteStore(path) as second:
        async with SQLiteStore(path) as first:
            first.attach(await first.load("one"))
            await first.load("two")  # loaded, never attached: still claimed
            await _assert_locked(second, "one")
            await _assert_locked(second, "two")
        assert [loaded.id for loaded in [await second.load("one"), await second.load("two")]] == [
            "one",
            "two",
        ]
    assert _lock_files(path) == []


async def test_sqlite_new_session_is_claimed_by_its_first_flush(tmp_path: Path) -> None:
    """R12.7: the creator of a session holds its claim from its first commit until detach."""
    path = tmp_path / "sessions.db"
    async with SQLiteStore(path) as first, SQLiteStore(path) as second:
        session = Session.create("fresh")
        first.attach_new(session)
        run_turn(session)
        await first.flush(session)
        await _assert_locked(second, "fresh")
        lock_file = Path(f"{path}.locks") / f"{escape_id('fresh')}.lock"
        assert lock_file.exists()
        await first.detach(session)
        assert not lock_file.exists()
        loaded = await second.load("fresh")
    assert lines(loaded.events[:]) == lines(session.events[:])


def _open_lock_files(path: Path) -> list[str]:
    """The descriptors of this process open on a lock file of the store at *path* (one
    removed still names its path, marked deleted)."""
    fds = Path("/proc/self/fd")
    targets = [str(fd.readlink()) for fd in fds.iterdir() if fd.is_symlink()]
    return [target for target in targets if target.startswith(f"{path}.locks{os.sep}")]


async def test_sqlite_detach_closes_the_lock_file_of_its_claim(tmp_path: Path) -> None:
    """R12.7: detaching a session closes its lock file, not only removes it: each claim
    given up would otherwise keep a descriptor open until the store closes, one more per
    load, until the process runs out of them."""
    path = tmp_path / "sessions.db"
    await _stored(path, "one", "two")
    async with SQLiteStore(path) as store:
        for _ in range(3):
            for session_id in ("one", "two"):
                loaded = await store.load(session_id)
                store.attach(loaded)
                assert len(_open_lock_files(path)) == 1
                await store.detach(loaded)
                assert _open_lock_files(path) == []


async def test_sqlite_append_without_a_load_is_refused_while_claimed(tmp_path: Path) -> None:
    """R12.7: attaching a stored session elsewhere gets SESSION_LOCKED at flush; nothing is written."""
    path = tmp_path / "sessions.db"
    await _stored(path, "held")
    async with SQLiteStore(path) as first, SQLiteStore(path) as second:
        mine = await first.load("held")
        first.attach(mine)
        theirs = await second.inspect("held")
        second.attach(theirs)
        run_turn(theirs)
        with pytest.raises(StoreError) as caught:
            await second.flush(theirs)
        assert caught.value.code == "SESSION_LOCKED"
        assert "'held'" in caught.value.message
        run_turn(mine)
        await first.detach(mine)
        with pytest.raises(StoreError):
            await second.aclose()
    async with SQLiteStore(path) as store:
        assert lines((await store.load("held")).events[:]) == lines(mine.events[:])


async def test_sqlite_append_refused_as_claimed_does_not_wait_for_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7, R11.5: a flush refused when claiming its session writes nothing, so it takes no write
    lock: it is refused at once with SESSION_LOCKED while another connection holds the database's
    write transaction, rather than waiting out the busy timeout for a lock it has no use for and
    failing with a storage error naming that lock."""
    import retinue.stores._sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "_BUSY_TIMEOUT_MS", 300)
    path = tmp_path / "sessions.db"
    await _stored(path, "held")
    async with SQLiteStore(path) as first, SQLiteStore(path) as second:
        mine = await first.load("held")
        first.attach(mine)
        theirs = await second.inspect("held")
        second.attach(theirs)
        run_turn(theirs)
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError) as caught:
                await second.flush(theirs)
        finally:
            blocker.rollback()
            blocker.close()
        assert caught.value.code == "SESSION_LOCKED"
        assert "'held'" in caught.value.message
        second._tracked.pop("held").unsubscribe()  # refused: nothing left to drain on exit
        await first.detach(mine)


@pytest.mark.parametrize("session_id", LONG_IDS, ids=["plain", "ascii", "cjk", "astral"])
async def test_sqlite_claims_ids_of_any_valid_length(tmp_path: Path, session_id: str) -> None:
    """R11.12, R12.7: an id of up to 512 characters gets a lock file whose name fits."""
    path = tmp_path / "sessions.db"
    await _stored(path, session_id)
    async with SQLiteStore(path) as first, SQLiteStore(path) as second:
        first.attach(await first.load(session_id))
        await _assert_locked(second, session_id)
        [lock_file] = _lock_files(path)
        assert len(lock_file.encode()) <= 255


async def test_sqlite_another_process_cannot_load_a_claimed_session(tmp_path: Path) -> None:
    """R12.7: the claim excludes other processes, and a process that exits drops it."""
    path = tmp_path / "sessions.db"
    await _stored(path, "shared")
    child = textwrap.dedent(
        f"""
        import trio
        from retinue.stores import SQLiteStore

        async def main():
            async with SQLiteStore({str(path)!r}) as store:
                try:
                    await store.load("shared")
                except Exception as exc:
                    print(exc.code)
                else:
                    print("loaded")

        trio.run(main)
        """
    )

    async def load_elsewhere() -> str:
        run = await trio.run_process(
            [sys.executable, "-c", child], capture_stdout=True, capture_stderr=True, check=False
        )
        assert run.returncode == 0, run.stderr.decode()
        return run.stdout.decode().strip()

    async with SQLiteStore(path) as store:
        store.attach(await store.load("shared"))
        assert await load_elsewhere() == "SESSION_LOCKED"
    assert await load_elsewhere() == "loaded"


# -- rows that are not UTF-8 (R11.8, R11.14) ----------------------------------


def _corrupt_header(path: Path, session_id: str) -> None:
    _sql(
        path,
        "UPDATE sessions SET header = CAST(CAST(header AS BLOB) || x'ff' AS TEXT) WHERE id = ?",
        session_id,
    )


def _corrupt_line(path: Path, session_id: str, first_seq: int, line: int) -> None:
    """Put a byte that is not UTF-8 into one line of a segment row, keeping it TEXT."""
    [(sid, body)] = _sql(
        path,
        "SELECT s.sid, CAST(body AS BLOB) FROM segments s JOIN sessions USING (sid) "
        "WHERE id = ? AND first_seq = ?",
        session_id,
        first_seq,
    )
    parts = bytes(body).split(b"\n")
    parts[line] = b"\xff" + parts[line]
    _sql(
        path,
        "UPDATE segments SET body = CAST(? AS TEXT) WHERE sid = ? AND first_seq = ?",
        b"\n".join(parts),
        sid,
        first_seq,
    )


async def test_sqlite_list_skips_a_header_that_is_not_utf8(tmp_path: Path) -> None:
    """R11.14: list() skips the one bad header; loading it is a CorruptSessionError naming it."""
    path = tmp_path / "sessions.db"
    await _stored(path, "good", "bad", "also-good")
    _corrupt_header(path, "bad")
    async with SQLiteStore(path) as store:
        assert sorted(header.id for header in await store.list()) == ["also-good", "good"]
        with pytest.raises(CorruptSessionError, match="'bad'") as caught:
            await store.load("bad")
        assert caught.value.code == "CORRUPT_HEADER"
        assert await store.exists("bad")


async def test_sqlite_committed_event_that_is_not_utf8_names_session_and_seq(
    tmp_path: Path,
) -> None:
    """R11.8: a non-UTF-8 event in the committed region is corrupt, naming the session and seq."""
    path = tmp_path / "sessions.db"
    await _stored(path, "good", "bad", turns=2)
    _corrupt_line(path, "bad", 0, 1)
    async with SQLiteStore(path) as store:
        assert sorted(header.id for header in await store.list()) == ["bad", "good"]
        with pytest.raises(CorruptSessionError, match=r"'bad'.*event 1 ") as caught:
            await store.load("bad")
        assert caught.value.code == "CORRUPT_SESSION"
        assert (await store.load("good")).last_turn == 2


def _rows(path: Path) -> list[tuple[Any, ...]]:
    """Every stored row, bodies as bytes: what a load must leave as it found."""
    return _sql(path, "SELECT id, next_seq FROM sessions ORDER BY id") + _sql(
        path, "SELECT sid, first_seq, count, CAST(body AS BLOB) FROM segments ORDER BY 1, 2"
    )


async def test_sqlite_last_event_that_is_not_utf8_is_refused_and_kept(tmp_path: Path) -> None:
    """R11.8: SQLite commits each write in a transaction and never holds a torn write, so a
    non-UTF-8 last event, past the last complete turn/end, is damage to a committed event:
    the load fails naming the session and the event, and no row is changed."""
    path = tmp_path / "sessions.db"
    await _stored(path, "torn", turns=2)
    [(first_seq, count)] = _sql(
        path, "SELECT first_seq, count FROM segments WHERE first_seq > 0 ORDER BY first_seq"
    )
    _corrupt_line(path, "torn", int(first_seq), int(count) - 1)
    before = _rows(path)
    last = int(first_seq) + int(count) - 1
    async with SQLiteStore(path) as store:
        for read in (store.load, store.inspect, store.load):
            with pytest.raises(CorruptSessionError, match=rf"'torn'.*event {last} ") as caught:
                await read("torn")
            assert caught.value.code == "CORRUPT_SESSION"
    assert _rows(path) == before


async def test_sqlite_segment_stored_as_a_blob_is_read(tmp_path: Path) -> None:
    """R11.8: a segment body stored with BLOB affinity holds the same lines and loads."""
    path = tmp_path / "sessions.db"
    await _stored(path, "blobby")
    _sql(path, "UPDATE segments SET body = CAST(body AS BLOB)")
    async with SQLiteStore(path) as store:
        loaded = await store.load("blobby")
    assert loaded.last_turn == 1
