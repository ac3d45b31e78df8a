"""SQLiteStore: one database file reached by two names has one set of claims."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import SQLiteStore
from tests.stores._kit import lines, run_turn


def _linked_file(path: Path) -> Path:
    alias = path.with_name("alias.db")
    alias.symlink_to(path)
    return alias


def _linked_folder(path: Path) -> Path:
    folder = path.parent.with_name("linked-folder")
    folder.symlink_to(path.parent, target_is_directory=True)
    return folder / path.name


def _dot_dot(path: Path) -> Path:
    (path.parent / "sub").mkdir()
    return path.parent / "sub" / ".." / path.name


ALIASES: dict[str, Callable[[Path], Path]] = {
    "a link to the file": _linked_file,
    "a link to its folder": _linked_folder,
    "a path through '..'": _dot_dot,
}


@pytest.mark.parametrize("alias", ALIASES.values(), ids=ALIASES.keys())
async def test_sqlite_a_session_claimed_by_one_name_is_locked_by_another(
    tmp_path: Path, alias: Callable[[Path], Path]
) -> None:
    """R12.7: claims are keyed by the database's real path, so a second store opening the
    same file by another name is refused SESSION_LOCKED instead of becoming a second writer.
    """
    path = tmp_path / "db" / "sessions.db"
    path.parent.mkdir()
    async with SQLiteStore(path) as store:
        session = Session.create("contested")
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
    other = alias(path)
    async with SQLiteStore(path) as first, SQLiteStore(other) as second:
        loaded = await first.load("contested")
        first.attach(loaded)
        with pytest.raises(StoreError) as caught:
            await second.load("contested")
        assert caught.value.code == "SESSION_LOCKED"
        assert "'contested'" in caught.value.message
        run_turn(loaded)
        await first.detach(loaded)
        again = await second.load("contested")
    assert lines(again.events) == lines(loaded.events)
