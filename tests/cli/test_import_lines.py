"""``retinue sessions import`` refuses, naming the line, what a store would refuse to load."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.session import Session
from retinue.stores import JSONLStore
from tests.stores._kit import run_turn


def _export(tmp_path: Path) -> list[str]:
    session = Session.create("s1")
    run_turn(session, "what is the weather?")
    return to_jsonl(session).splitlines()


def _stored(store: Path) -> list[str]:
    async def listed() -> list[str]:
        async with JSONLStore(store) as opened:
            return [header.id for header in await opened.list()]

    return trio.run(listed) if store.exists() else []


def _import(path: Path, store: Path) -> int:
    return main(["sessions", "import", str(path), "--store", f"jsonl:{store}"])


@pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "spaces"])
def test_import_refuses_a_blank_line_inside_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], blank: str
) -> None:
    """A blank line before the last record was skipped, and the log stored without it;
    a JSONL store reads that line as a corrupt record and refuses the file. Now the import
    refuses it, naming its line, and stores nothing; blank lines at the end still pass."""
    lines = _export(tmp_path)
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join([*lines[:5], blank, *lines[5:]]) + "\n\n \n", encoding="utf-8")
    store = tmp_path / "store"
    assert _import(path, store) == 1
    assert capsys.readouterr().err == (
        f"retinue sessions import: {path}, line 6: a blank line inside the log (every line "
        "up to the last is a record: the header, then one event per line)\n"
    )
    assert _stored(store) == []
    path.write_text("\n".join(lines) + "\n\n \n", encoding="utf-8")
    assert _import(path, store) == 0
    assert _stored(store) == ["s1"]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_import_names_the_line_of_a_byte_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], newline: bytes
) -> None:
    """A byte that is no UTF-8 was reported without its line; now the line holding it is
    named, counted as the file's lines are, whatever ends them."""
    lines = [line.encode() for line in _export(tmp_path)]
    lines[3] = lines[3].replace(b'"seq":2', b'"seq":2,"x":"\xff"')
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(newline.join(lines) + newline)
    assert _import(path, tmp_path / "store") == 1
    assert capsys.readouterr().err == (
        f"retinue sessions import: {path}, line 4: not UTF-8 text: invalid start byte\n"
    )
