"""A store given a relative path keeps to the place it named when it was made (R11.3, R11.11).

A tool may change the process's working directory (into an agent's cwd, say);
a store that resolved its path again for each connection or file would then
read, and create, another store there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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
