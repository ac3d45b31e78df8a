"""``--store sqlite:~/...`` and ``jsonl:~/...``: the home directory, as the user meant it.

The shell expands ``~`` only at the start of a word, so after ``sqlite:`` it reaches
the command as typed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.session import Session
from tests.stores._kit import run_turn


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory, and a working directory apart from it."""
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    return home


def _exported(directory: Path) -> Path:
    session = Session.create("s1")
    run_turn(session, "what is the weather?")
    path = directory / "s1.jsonl"
    path.write_text(to_jsonl(session), encoding="utf-8")
    return path


@pytest.mark.parametrize(("kind", "location"), [("sqlite", "s.db"), ("jsonl", "sessions")])
def test_sessions_take_a_file_store_under_the_home_directory(
    home: Path, kind: str, location: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An import to ``~/...`` stores the session in the home directory and a listing reads it there:
    neither takes ``~`` as a directory of the working directory, so the import creates no directory
    ``~`` there (one that ``rm -r ~`` would miss for home)."""
    spec = f"{kind}:~/{location}"
    exported = _exported(home.parent)
    assert main(["sessions", "import", str(exported), "--store", spec]) == 0
    assert (home / location).exists()
    assert not Path("~").exists()
    capsys.readouterr()
    assert main(["sessions", "list", "--store", spec]) == 0
    assert capsys.readouterr().out.split("\t")[0] == "s1"


def test_the_demo_stores_its_sessions_under_the_home_directory(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``retinue demo --store sqlite:~/demo.db`` writes the database in the home directory, and does
    not refuse to start for want of a directory ``~`` in the working directory."""
    argv = ["demo", "--provider", "scripted", "--latency", "0", "--agents", "1", "--turns", "1"]
    assert main([*argv, "--no-live", "--store", "sqlite:~/demo.db"]) == 0
    assert (home / "demo.db").is_file()
    assert not Path("~").exists()
    assert "retinue sessions list --store 'sqlite:~/demo.db'" in capsys.readouterr().out
