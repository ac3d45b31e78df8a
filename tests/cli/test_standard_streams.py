"""``-`` names the standard streams: ``sessions import -`` reads standard input, and
``sessions export -o -`` writes standard output, so one pipes into the other."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import trio

from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.session import Session
from retinue.stores import JSONLStore
from tests.stores._kit import run_turn


def _session() -> Session:
    session = Session.create("s1")
    run_turn(session, "what is the weather?")
    return session


def _stored_events(store: Path, session_id: str) -> int:
    async def loaded() -> int:
        async with JSONLStore(store, create=False) as opened:
            return len((await opened.inspect(session_id)).events)

    return trio.run(loaded)


def _given_as_standard_input(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_import_of_dash_stores_the_session_read_from_standard_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``export | import -``: the session is stored whole, and its line endings are read as a file's
    are. ``-`` is standard input, not the name of a file, which none has."""
    session = _session()
    exported = to_jsonl(session).replace("\n", "\r\n").encode()
    _given_as_standard_input(monkeypatch, exported)
    monkeypatch.chdir(tmp_path)
    assert main(["sessions", "import", "-", "--store", "jsonl:store"]) == 0
    assert capsys.readouterr().out == f"imported s1 ({len(session.events)} events)\n"
    assert _stored_events(tmp_path / "store", "s1") == len(session.events)
    assert not (tmp_path / "-").exists()


def test_import_of_dash_names_standard_input_in_its_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session cut off after its header, or no UTF-8: the error names ``<stdin>``."""
    header = to_jsonl(_session()).splitlines()[0]
    monkeypatch.chdir(tmp_path)
    _given_as_standard_input(monkeypatch, f"{header}\n".encode())
    assert main(["sessions", "import", "-", "--store", "jsonl:store"]) == 1
    _given_as_standard_input(monkeypatch, b"\xff\n")
    assert main(["sessions", "import", "-", "--store", "jsonl:store"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "retinue sessions import: <stdin> has no events to import",
        "retinue sessions import: <stdin>, line 1: not UTF-8 text: invalid start byte",
    ]


def test_export_to_dash_writes_standard_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """``-o -`` writes the session to standard output, as no ``-o`` does, not to a file named
    ``-``."""
    session = _session()
    (tmp_path / "s1.jsonl").write_text(to_jsonl(session), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["sessions", "import", "s1.jsonl", "--store", "jsonl:store"]) == 0
    capsysbinary.readouterr()
    assert main(["sessions", "export", "s1", "--store", "jsonl:store", "-o", "-"]) == 0
    assert capsysbinary.readouterr().out.decode() == to_jsonl(session)
    assert not (tmp_path / "-").exists()
