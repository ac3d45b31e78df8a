"""``retinue sessions delete``: it deletes a stored session, and refuses one that is missing or
held, and a store that does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from retinue.cli import main
from retinue.session import Session
from retinue.stores import JSONLStore, SQLiteStore
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import run_turn


async def _store(store: BufferedStore, *session_ids: str) -> None:
    async with store:
        for session_id in session_ids:
            session = Session.create(session_id)
            store.attach_new(session)
            run_turn(session)
            await store.detach(session)


async def _ids(store: BufferedStore) -> list[str]:
    async with store:
        return [header.id for header in await store.list()]


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_sessions_delete_deletes_the_session_and_says_so(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.3: ``sessions delete ID`` deletes the session, leaves the others, prints
    ``deleted ID`` and exits 0."""
    location = tmp_path / ("sessions.db" if kind == "sqlite" else "sessions")
    make = SQLiteStore if kind == "sqlite" else JSONLStore
    trio.run(_store, make(location), "gone", "kept")
    assert main(["sessions", "delete", "gone", "--store", f"{kind}:{location}"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("deleted gone\n", "")
    assert trio.run(_ids, make(location)) == ["kept"]


def test_sessions_delete_of_a_missing_id_fails_with_the_stores_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.3: an id the store does not hold exits 1 with the store's one-line message."""
    path = tmp_path / "sessions.db"
    trio.run(_store, SQLiteStore(path), "kept")
    assert main(["sessions", "delete", "missing", "--store", f"sqlite:{path}"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "retinue sessions delete: session 'missing' is not stored\n"
    assert trio.run(_ids, SQLiteStore(path)) == ["kept"]


def test_sessions_delete_refuses_a_session_another_store_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.3, R12.7: a session a live writer holds is refused (exit 1, the store's message naming
    it) and stays stored whole."""
    path = tmp_path / "sessions.db"
    trio.run(_store, SQLiteStore(path), "held")

    async def delete_while_held() -> int:
        async with SQLiteStore(path) as store:
            store.attach(await store.load("held"))
            return await trio.to_thread.run_sync(
                main, ["sessions", "delete", "held", "--store", f"sqlite:{path}"]
            )

    assert trio.run(delete_while_held) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("retinue sessions delete: session 'held' is being written")
    assert trio.run(_ids, SQLiteStore(path)) == ["held"]


def test_sessions_delete_refuses_a_store_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.3: a store path that holds nothing is refused (exit 1) and nothing is created there,
    as the reading commands refuse it."""
    path = tmp_path / "typo.db"
    assert main(["sessions", "delete", "any", "--store", f"sqlite:{path}"]) == 1
    assert "no sqlite store at" in capsys.readouterr().err
    assert not path.exists()


def test_sessions_delete_leaves_a_sqlite_file_that_is_no_store_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.3: a SQLite file that is not a retinue store is refused and not converted into one
    (no tables written into it)."""
    path = tmp_path / "other.db"
    path.write_bytes(b"")
    assert main(["sessions", "delete", "any", "--store", f"sqlite:{path}"]) == 1
    assert "not a retinue store" in capsys.readouterr().err
    assert path.read_bytes() == b""


def test_sessions_delete_help_describes_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``sessions --help`` lists delete, and ``sessions delete --help`` says what it does and
    when it is refused."""
    with pytest.raises(SystemExit):
        main(["sessions", "--help"])
    assert "delete a stored session" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["sessions", "delete", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Delete a stored session" in out
    assert "another process holds" in out
