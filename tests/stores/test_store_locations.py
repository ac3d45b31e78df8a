"""A file store refuses a location it would misread: the empty path as a JSONL root (the working
directory to ``Path``), and a file holding something other than an SQLite database as an SQLite
store, whatever its size (SQLite took one shorter than its header for an empty database)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from retinue import ConfigError
from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore, SQLiteStore
from tests.stores._kit import run_turn


@pytest.mark.parametrize("create", [True, False])
def test_a_jsonl_store_refuses_the_empty_path_as_sqlite_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, create: bool
) -> None:
    """R11.12: ``JSONLStore("")`` is a ``ConfigError`` coded ``INVALID_STORE_PATH``, as
    ``SQLiteStore("")`` is, not a store of the working directory."""
    monkeypatch.chdir(tmp_path)
    for store in (JSONLStore, SQLiteStore):
        with pytest.raises(ConfigError) as caught:
            store("", create=create)
        assert caught.value.code == "INVALID_STORE_PATH"
        assert "not ''" in caught.value.message
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("create", [True, False])
@pytest.mark.parametrize("size", [1, 2, 99, 4096])
async def test_an_sqlite_store_never_writes_over_a_file_that_is_no_database(
    tmp_path: Path, size: int, *, create: bool
) -> None:
    """R11.12: a file holding bytes that do not start with the SQLite header is refused
    ``UNSUPPORTED_SCHEMA`` naming it, and left as it was, a one-byte file too."""
    path = tmp_path / "notes.txt"
    notes = (b"my notes\n" * size)[:size]
    path.write_bytes(notes)
    with pytest.raises(StoreError) as caught:
        async with SQLiteStore(path, create=create):
            pass
    assert caught.value.code == "UNSUPPORTED_SCHEMA"
    assert caught.value.message == (
        f"{path} is not an SQLite database: what it holds does not start with the SQLite "
        "header, and nothing is written over it"
    )
    assert path.read_bytes() == notes
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


async def test_an_sqlite_store_still_opens_an_empty_file_and_its_own_database(
    tmp_path: Path,
) -> None:
    """An empty file is a new database, and a store reopens the database it wrote."""
    path = tmp_path / "sessions.db"
    path.write_bytes(b"")
    session = Session.create("s1")
    run_turn(session)
    async with SQLiteStore(path) as store:
        store.attach_new(session)
    async with SQLiteStore(path, create=False) as store:
        assert [header.id for header in (await store.listing()).headers] == ["s1"]


async def test_an_sqlite_store_leaves_a_file_beside_a_hot_journal_to_sqlite(
    tmp_path: Path,
) -> None:
    """A new database whose first transaction a crash cut short, its pages lost (NULs where
    the writes never reached the disk) and its rollback journal left: SQLite rolls the
    journal back to the empty database it was, and the store opens it, where the header
    check refused it ``UNSUPPORTED_SCHEMA`` until the file was deleted by hand."""
    path = tmp_path / "store.db"
    crash = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA cache_size=1'); c.execute('PRAGMA journal_mode=DELETE')\n"
        "c.execute('BEGIN'); c.execute('CREATE TABLE t(x)')\n"
        "for _ in range(200): c.execute('INSERT INTO t VALUES (?)', ('x' * 500,))\n"
        "os._exit(9)\n"
    )
    with trio.fail_after(60):
        await trio.run_process([sys.executable, "-c", crash, str(path)], check=False)
    assert (tmp_path / "store.db-journal").exists()
    path.write_bytes(b"\0" * path.stat().st_size)
    async with SQLiteStore(path) as store:
        assert (await store.listing()).headers == ()
