"""Deleting a session another writer holds (R11.3, R12.7), and what a delete leaves of a session
in each durable backend's storage."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore, PostgresStore, SQLiteStore
from retinue.stores._ids import bucket_name, file_stem
from retinue.stores._jsonl import JSONLBackend
from retinue.stores._writebehind import BufferedStore
from tests.stores._conformance_kit import store_turns
from tests.stores._kit import lines, run_turn
from tests.stores.conftest import StoreKit


async def _refusal(store: BufferedStore, session_id: str) -> StoreError:
    with pytest.raises(StoreError) as caught:
        await store.delete(session_id)
    return caught.value


async def test_delete_refuses_a_session_another_store_writes(blocking_kit: StoreKit) -> None:
    """R11.3, R12.7: a session another store of the same storage has loaded is refused with the
    code a load of it gets there (``SESSION_LOCKED``), and nothing of it is deleted: its writer
    appends on, and once it lets go the delete goes through."""
    session = Session.create("theirs")
    await store_turns(blocking_kit, session, turns=1)
    async with blocking_kit.open() as writer, blocking_kit.open() as other:
        mine = await writer.load("theirs")
        writer.attach(mine)
        with pytest.raises(StoreError) as loading:
            await other.load("theirs")
        refused = await _refusal(other, "theirs")
        assert refused.code == loading.value.code == "SESSION_LOCKED"
        assert "theirs" in refused.message
        run_turn(mine, "still written")
        await writer.flush(mine)
        assert lines((await other.inspect("theirs")).events) == lines(mine.events)
        await writer.detach(mine)
        await other.delete("theirs")
        assert not await writer.exists("theirs")


def _child_source(kind: str, location: str, schema: str) -> str:
    """A process that loads and attaches session ``held``, says so, and holds it until its
    standard input closes."""
    stores = {
        "sqlite": f"SQLiteStore({location!r})",
        "jsonl": f"JSONLStore({location!r})",
        "postgres": f"PostgresStore({location!r}, schema={schema!r})",
    }
    return textwrap.dedent(
        f"""
        import sys
        import trio
        from retinue.stores import JSONLStore, PostgresStore, SQLiteStore

        async def main():
            async with {stores[kind]} as store:
                store.attach(await store.load("held"))
                print("held", flush=True)
                await trio.to_thread.run_sync(sys.stdin.read)

        trio.run(main)
        """
    )


Located = tuple[str, str, str, Callable[[], BufferedStore]]
"""A durable store's kind, location and schema, and a factory of stores over it."""


@pytest.fixture(params=["sqlite", "jsonl", "postgres"])
def located(request: pytest.FixtureRequest, tmp_path: Path) -> Located:
    """Each durable store, as another process opens it too."""
    kind: str = request.param
    if kind == "sqlite":
        path = str(tmp_path / "sessions.db")
        return kind, path, "", lambda: SQLiteStore(path)
    if kind == "jsonl":
        root = str(tmp_path / "sessions")
        return kind, root, "", lambda: JSONLStore(root)
    dsn, schema = request.getfixturevalue("postgres_schema")
    return kind, dsn, schema, lambda: PostgresStore(dsn, schema=schema)


async def test_delete_refuses_a_session_another_process_holds(located: Located) -> None:
    """R11.3, R12.7: a session another process has loaded and attached is refused
    ``SESSION_LOCKED`` and left whole; once that process exits, the delete goes through."""
    kind, location, schema, make = located
    session = Session.create("held")
    async with make() as store:
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
    source = _child_source(kind, location, schema)
    child = await trio.lowlevel.open_process(
        [sys.executable, "-c", source], stdin=-1, stdout=-1, env=os.environ
    )
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        with trio.fail_after(60):
            said = b""
            while b"held" not in said:
                chunk = await child.stdout.receive_some()
                assert chunk, "the child ended before holding the session"
                said += chunk
        async with make() as store:
            refused = await _refusal(store, "held")
            assert refused.code == "SESSION_LOCKED"
            assert lines((await store.inspect("held")).events) == lines(session.events)
        await child.stdin.aclose()
        with trio.fail_after(60):
            assert await child.wait() == 0
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    async with make() as store:
        await store.delete("held")
        assert not await store.exists("held")


def _entries(directory: Path, *, every: bool = False) -> list[Path]:
    """What *directory* holds (*every*: at any depth); none if it does not exist."""
    if not directory.exists():
        return []
    return list(directory.rglob("*") if every else directory.iterdir())


async def test_sqlite_delete_leaves_no_row_and_no_lock_file(tmp_path: Path) -> None:
    """R11.3: SQLite deletes a session's row and every segment of it, and the lock file of its
    claim; the other sessions' rows stay."""
    path = tmp_path / "sessions.db"
    store_kit = StoreKit("sqlite", lambda: SQLiteStore(path), *([None] * 3))  # type: ignore[arg-type]
    await store_turns(store_kit, Session.create("gone"), turns=3)
    await store_turns(store_kit, Session.create("kept"), turns=1)
    async with SQLiteStore(path) as store:
        await store.delete("gone")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT id FROM sessions").fetchall() == [("kept",)]
        orphans = "SELECT count(*) FROM segments WHERE sid NOT IN (SELECT sid FROM sessions)"
        assert conn.execute(orphans).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM segments").fetchone()[0] > 0
    assert _entries(Path(f"{path}.locks")) == []


async def test_sqlite_delete_that_fails_part_way_leaves_the_session_whole(tmp_path: Path) -> None:
    """R11.3: SQLite deletes a session in one transaction: a failure once its segments are deleted
    and before its row is (a trigger refusing the row's delete) rolls both back, and the session
    loads whole; without the trigger the delete goes through."""
    path = tmp_path / "sessions.db"
    session = Session.create("whole")
    async with SQLiteStore(path) as store:
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
    refuse = "CREATE TRIGGER refuse BEFORE DELETE ON sessions BEGIN SELECT RAISE(ABORT, 'no'); END"
    _sqlite_run(path, refuse)
    async with SQLiteStore(path) as store:
        with pytest.raises(StoreError) as caught:
            await store.delete("whole")
        assert caught.value.code == "STORAGE_ERROR"
        assert lines((await store.load("whole")).events) == lines(session.events)
    _sqlite_run(path, "DROP TRIGGER refuse")
    async with SQLiteStore(path) as store:
        await store.delete("whole")
        assert not await store.exists("whole")


def _sqlite_run(path: Path, sql: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql)


async def test_jsonl_delete_removes_the_file_and_keeps_the_bucket(tmp_path: Path) -> None:
    """R11.3: JSONL deletes a session's file, and nothing else under the root holds the session
    (no temporary, no creation marker); its cwd bucket stays for the sessions still in it and for
    creations under way in it."""
    root = tmp_path / "sessions"
    store_kit = StoreKit("jsonl", lambda: JSONLStore(root), *([None] * 3))  # type: ignore[arg-type]
    await store_turns(store_kit, Session.create("gone", cwd="/srv/app"))
    await store_turns(store_kit, Session.create("alone", cwd="/srv/other"))
    async with JSONLStore(root) as store:
        await store.delete("gone")
        await store.delete("alone")
        again = Session.create("alone", cwd="/srv/other")
        store.attach_new(again)
        run_turn(again)
        await store.detach(again)
    stem = file_stem("gone")
    assert [path for path in _entries(root, every=True) if stem in path.name] == []
    assert len([path for path in _entries(root) if not path.name.startswith(".")]) == 2
    async with JSONLStore(root) as store:
        assert lines((await store.load("alone")).events) == lines(again.events)
        assert not await store.exists("gone")


async def test_postgres_delete_leaves_no_row(postgres_schema: tuple[str, str]) -> None:
    """R11.3: PostgreSQL deletes a session's row and every segment row of it in one transaction;
    the other sessions' rows stay."""
    import psycopg

    dsn, schema = postgres_schema
    store_kit = StoreKit("postgres", lambda: PostgresStore(dsn, schema=schema), *([None] * 3))  # type: ignore[arg-type]
    await store_turns(store_kit, Session.create("gone"), turns=3)
    await store_turns(store_kit, Session.create("kept"), turns=1)
    async with PostgresStore(dsn, schema=schema) as store:
        await store.delete("gone")
    with psycopg.connect(dsn, autocommit=True) as conn:
        sessions = conn.execute(f'SELECT id FROM "{schema}".retinue_sessions').fetchall()
        segments = conn.execute(
            f'SELECT DISTINCT session_id FROM "{schema}".retinue_segments'
        ).fetchall()
    assert sessions == [("kept",)]
    assert segments == [("kept",)]


async def test_postgres_delete_that_fails_part_way_leaves_the_session_whole(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.3: PostgreSQL deletes a session in one transaction: a failure once its segments are
    deleted and before its row is (a trigger refusing the row's delete) rolls both back, and the
    session loads whole; without the trigger the delete goes through."""
    import psycopg

    dsn, schema = postgres_schema
    session = Session.create("whole")
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f'CREATE FUNCTION "{schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS '
            "$$ BEGIN RAISE EXCEPTION 'refused'; END $$"
        )
        conn.execute(
            f'CREATE TRIGGER refuse BEFORE DELETE ON "{schema}".retinue_sessions '
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".refuse()'
        )
    async with PostgresStore(dsn, schema=schema) as store:
        with pytest.raises(StoreError) as caught:
            await store.delete("whole")
        assert caught.value.code == "STORAGE_ERROR"
        assert lines((await store.load("whole")).events) == lines(session.events)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP TRIGGER refuse ON "{schema}".retinue_sessions')
    async with PostgresStore(dsn, schema=schema) as store:
        await store.delete("whole")
        assert not await store.exists("whole")


async def test_jsonl_delete_keeps_a_bucket_another_links_to(tmp_path: Path) -> None:
    """R11.3: deleting the last session of a bucket another cwd's bucket links to leaves the
    bucket: a session is created in the linked cwd afterwards, and loads."""
    root = tmp_path / "sessions"
    async with JSONLStore(root) as store:
        first = Session.create("one", cwd="/real")
        store.attach_new(first)
        run_turn(first)
        await store.detach(first)
    (root / bucket_name("/alias")).symlink_to(bucket_name("/real"))
    async with JSONLStore(root) as store:
        await store.delete("one")
        second = Session.create("two", cwd="/alias")
        store.attach_new(second)
        run_turn(second)
        await store.detach(second)
    async with JSONLStore(root) as store:
        assert lines((await store.load("two")).events) == lines(second.events)


@pytest.mark.parametrize("operation", ["delete", "load"])
async def test_jsonl_session_deleted_between_lookup_and_open_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    """R11.3: a session another store deletes after this one found its file, before it
    opened it, is not stored: ``SESSION_NOT_FOUND``, as when it was gone before."""
    root = tmp_path / "sessions"
    await store_turns(
        StoreKit("jsonl", lambda: JSONLStore(root), *([None] * 3)),  # type: ignore[arg-type]
        Session.create("gone", cwd="/srv/app"),
    )
    other = JSONLBackend(root)
    other.open()
    found = JSONLBackend._only_stored

    def found_then_deleted(backend: JSONLBackend, session_id: str) -> Path | None:
        path = found(backend, session_id)
        if backend is not other and path is not None:
            other.claim(session_id)
            other.delete(session_id)
            other.release(session_id)
        return path

    monkeypatch.setattr(JSONLBackend, "_only_stored", found_then_deleted)
    try:
        async with JSONLStore(root) as store:
            with pytest.raises(StoreError) as caught:
                await getattr(store, operation)("gone")
    finally:
        other.close()
    assert caught.value.code == "SESSION_NOT_FOUND"


async def test_jsonl_delete_reaching_a_closed_backend_is_refused_store_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3: a JSONL delete whose backend closed after it took the claim (the store closed
    meanwhile) is refused ``STORE_CLOSED``, as SQLite and PostgreSQL refuse it, and the
    session stays whole."""
    root = tmp_path / "sessions"
    session = Session.create("kept", cwd="/srv/app")
    await store_turns(
        StoreKit("jsonl", lambda: JSONLStore(root), *([None] * 3)),  # type: ignore[arg-type]
        session,
    )
    deleting = JSONLBackend.delete

    def closed_first(backend: JSONLBackend, session_id: str) -> None:
        backend.close()
        deleting(backend, session_id)

    monkeypatch.setattr(JSONLBackend, "delete", closed_first)
    async with JSONLStore(root) as store:
        with pytest.raises(StoreError) as caught:
            await store.delete("kept")
    assert caught.value.code == "STORE_CLOSED"
    monkeypatch.undo()
    async with JSONLStore(root) as store:
        assert lines((await store.load("kept")).events) == lines(session.events)
