"""``sessions export --output`` refuses a file of the store it reads, leaving the store as it was.

Written, the export would replace a SQLite database with JSONL (every later command then failing:
the file no database) or write into a JSONL store's directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.session import Session
from tests.stores._kit import run_turn


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    """A session's JSONL file, apart from any store."""
    session = Session.create("s1")
    run_turn(session, "what is the weather?")
    path = tmp_path / "s1.jsonl"
    path.write_text(to_jsonl(session), encoding="utf-8")
    return path


def _stored(spec: str, exported: Path) -> None:
    assert main(["sessions", "import", str(exported), "--store", spec]) == 0


def _export(spec: str, output: Path | str) -> int:
    return main(["sessions", "export", "s1", "--store", spec, "-o", str(output)])


@pytest.mark.parametrize("output", ["s.db", "./s.db", "s.db-wal", "link.db"])
def test_export_onto_the_sqlite_store_is_refused_and_leaves_it(
    tmp_path: Path,
    exported: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    output: str,
) -> None:
    """The database, a file of its journal or a hard link to it: status 1, one line, the
    store still lists its session."""
    monkeypatch.chdir(tmp_path)
    _stored("sqlite:s.db", exported)
    os.link("s.db", "link.db")
    before = Path("s.db").read_bytes()
    capsys.readouterr()
    assert _export("sqlite:s.db", output) == 1
    assert "is the sqlite store 's.db' itself" in capsys.readouterr().err
    assert Path("s.db").read_bytes() == before
    assert main(["sessions", "list", "--store", "sqlite:s.db"]) == 0
    assert capsys.readouterr().out.startswith("s1\t")


def test_export_into_the_jsonl_store_is_refused(
    tmp_path: Path, exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file inside the JSONL store's directory is refused; nothing is written there."""
    store = tmp_path / "sessions"
    _stored(f"jsonl:{store}", exported)
    files = sorted(store.rglob("*"))
    capsys.readouterr()
    assert _export(f"jsonl:{store}", store / "copy.jsonl") == 1
    assert "lies inside the jsonl store" in capsys.readouterr().err
    assert sorted(store.rglob("*")) == files


def test_export_beside_the_store_is_written(
    tmp_path: Path, exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file apart from the store is written as any output is."""
    _stored(f"sqlite:{tmp_path / 's.db'}", exported)
    assert _export(f"sqlite:{tmp_path / 's.db'}", tmp_path / "out.jsonl") == 0
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == exported.read_text(
        encoding="utf-8"
    )
    capsys.readouterr()


def test_export_onto_a_link_to_a_jsonl_session_file_is_refused(
    tmp_path: Path, exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hard link to one of the JSONL store's session files is that file: refused, and
    the stored session is left as it was."""
    store = tmp_path / "sessions"
    _stored(f"jsonl:{store}", exported)
    (stored,) = store.rglob("*.jsonl")
    before = stored.read_bytes()
    link = tmp_path / "link.jsonl"
    os.link(stored, link)
    capsys.readouterr()
    assert _export(f"jsonl:{store}", link) == 1
    assert "jsonl store" in capsys.readouterr().err
    assert stored.read_bytes() == before
