"""A store given a relative path keeps to the place it named when it was made (R11.3, R11.11).

A tool may change the process's working directory (into an agent's cwd, say);
a store that resolved its path again for each connection or file would then
read, and create, another store there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from retinue import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore, SQLiteStore
from retinue.stores._writebehind import BufferedStore

STORES: dict[str, Callable[[], BufferedStore]] = {
    "sqlite": lambda: SQLiteStore("relative.db"),
    "jsonl": lambda: JSONLStore("relative"),
}


@pytest.mark.parametrize("kind", sorted(STORES))
async def test_a_relative_store_path_is_kept_across_a_change_of_directory(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored session is still found after a ``chdir`` (a second one of its id would
    be created there otherwise), and nothing is made in the new directory."""
    first, elsewhere = tmp_path / "first", tmp_path / "elsewhere"
    first.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(first)
    async with STORES[kind]() as store:
        session = Session.create("s1")
        session.append_custom("x/e", {"n": 1})
        store.attach_new(session)
        await store.detach(session)
        monkeypatch.chdir(elsewhere)
        assert await store.exists("s1")
        loaded = await store.load("s1")
        assert [event.type for event in loaded.events] == ["x/e"]
        await store.detach(loaded)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize(
    ("kind", "stored"), [("sqlite", "relative.db"), ("jsonl", "relative")], ids=["sqlite", "jsonl"]
)
async def test_a_relative_store_path_through_a_link_names_what_opening_it_names(
    kind: str, stored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``link/../x`` is the parent of the link's target, as the system resolves it; made
    absolute as text, ``..`` would cancel the link and name another place."""
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "inner")
    monkeypatch.chdir(tmp_path)
    store = (
        SQLiteStore(f"link/../{stored}") if kind == "sqlite" else JSONLStore(f"link/../{stored}")
    )
    async with store:
        session = Session.create("s1")
        session.append_custom("x/e", {"n": 1})
        store.attach_new(session)
        await store.detach(session)
    assert (tmp_path / "real" / stored).exists()
    assert not (tmp_path / stored).exists()


async def test_a_store_that_cannot_open_names_its_path(tmp_path: Path) -> None:
    """R11.11: a failed open names the store's file, where SQLite's own message ("unable to
    open database file") names none."""
    missing = tmp_path / "absent.db"
    with pytest.raises(StoreError, match="unable to open database file") as raised:
        async with SQLiteStore(missing, create=False):
            pass
    assert raised.value.message.startswith(f"opening SQLiteStore({str(missing)!r}): ")
    assert not missing.exists()
