"""``retinue sessions`` on stores it must leave as they are: a path no file can hold, a missing
store, another application's database, an empty file, what a crashed writer left in a JSONL
directory, a live writer's unfinished line."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import pytest
import trio

from retinue import Text
from retinue.session import ToolResultEvent
from retinue.session._codec import encode_event
from retinue.stores._jsonl import JSONLBackend
from tests.stores._cli_kit import cli, fill_jsonl
from tests.stores._kit import lines
from tests.stores.conftest import jsonl_file


@pytest.mark.parametrize("command", ["list", "show", "import"])
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_cli_sessions_name_a_store_path_holding_nul(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    """A ``--store`` path no file can have is a usage error naming it (status 2), not
    reported as a missing store (read commands) or as a bare "embedded null byte" (import)."""
    source = tmp_path / "in.jsonl"
    source.write_text("")
    location = f"{tmp_path}/a\0b"
    arguments = {"list": (), "show": ("s1",), "import": (str(source),)}[command]
    with pytest.raises(SystemExit) as caught:
        cli("--store", f"{kind}:{location}", command, *arguments)
    assert caught.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"retinue sessions: error: argument --store: {kind} store path "
        f"{location!r} contains a NUL character, which no file name can hold\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]


@pytest.mark.parametrize("command", ["list", "show", "export", "replay"])
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_cli_sessions_read_commands_never_create_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    """A mistyped store path is reported; reading commands create nothing there."""
    missing = tmp_path / "typo"
    argv = ["--store", f"{kind}:{missing}", command, *([] if command == "list" else ["some-id"])]
    assert cli(*argv) == 1
    assert f"no {kind} store at" in capsys.readouterr().err
    assert not missing.exists()


def _journal_and_tables(path: Path) -> tuple[str, list[str]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master ORDER BY 1")]
    return mode, tables


@pytest.mark.parametrize("command", ["list", "show", "export", "replay"])
def test_cli_sessions_read_commands_leave_another_database_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Another application's database is refused in one line with status 1; it keeps its
    journal mode and gains no tables."""
    other = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE notes (text)")
        conn.commit()
    target = [] if command == "list" else ["some-id"]
    assert cli("--store", f"sqlite:{other}", command, *target) == 1
    error = capsys.readouterr().err
    assert (
        error
        == f"retinue sessions {command}: {other} is an SQLite database without a retinue schema\n"
    )
    assert _journal_and_tables(other) == ("delete", ["notes"])


@pytest.mark.parametrize("command", ["list", "show", "export", "replay"])
def test_cli_sessions_read_commands_leave_an_empty_file_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """An empty file is not a store to read: it is refused in one line with status 1 and
    stays empty, with no journal or lock files beside it."""
    empty = tmp_path / "empty.db"
    empty.touch()
    target = [] if command == "list" else ["some-id"]
    assert cli("--store", f"sqlite:{empty}", command, *target) == 1
    error = capsys.readouterr().err
    assert (
        error == f"retinue sessions {command}: {empty} is not a retinue store (an empty database)\n"
    )
    assert empty.stat().st_size == 0
    assert [path.name for path in tmp_path.iterdir()] == ["empty.db"]


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*") if path.is_file()
    }


@pytest.mark.parametrize("command", ["list", "show", "export", "replay"])
def test_cli_sessions_read_commands_leave_a_jsonl_directory_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The reading commands change nothing: the temporary file and creation marker a
    crashed writer left in a JSONL directory stay (the directory may be read-only, a
    mounted backup, where removing them fails the command)."""
    root = tmp_path / "sessions"
    trio.run(fill_jsonl, root)
    bucket = jsonl_file(root, "crashed").parent
    (bucket / ".lost.jsonl.0011223344556677.tmp").write_text('{"type":"session"')
    (root / ".lost.creating").write_text('{"type":"session"')
    (root / ".creating").mkdir(exist_ok=True)
    (root / ".creating" / "lost.creating").write_text('{"type":"session"')
    (root / ".creating" / ".lost.0011223344556677.tmp").write_text('{"type":"session"')
    before = _tree(root)
    target = [] if command == "list" else ["crashed"]
    output = ["-o", str(tmp_path / "out.jsonl")] if command == "export" else []
    assert cli("--store", f"jsonl:{root}", command, *target, *output) == 0, capsys.readouterr()
    assert _tree(root) == before


@pytest.mark.parametrize("command", ["show", "export", "replay"])
def test_cli_sessions_read_a_live_session_up_to_its_last_complete_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """R11.8: a session whose writer is live, its last write only partly in the file yet,
    is read up to its last complete line: the unfinished line is not yet written, not a torn
    tail, so nothing is reported and the status is 0. Once written, the line is read."""
    root = tmp_path / "sessions"
    crashed = trio.run(fill_jsonl, root)
    path = jsonl_file(root, "crashed")
    writer = JSONLBackend(root)
    writer.open()
    writer.claim("crashed")  # the live writer's lock, held as a running agent's store holds it
    try:
        following = ToolResultEvent(2, 1, "call-2", (Text("rainy"),))
        call = len(crashed.events) - 1
        event = crashed.append(following, surface="append", source_event_seqs=[call])
        line = encode_event(event).encode() + b"\n"
        with path.open("ab") as file:
            file.write(line[: len(line) // 2])
        output = ["-o", str(tmp_path / "out.jsonl")] if command == "export" else []
        assert cli("--store", f"jsonl:{root}", command, "crashed", *output) == 0
        captured = capsys.readouterr()
        assert "torn" not in captured.out + captured.err
        if command == "export":
            exported = (tmp_path / "out.jsonl").read_text().splitlines()
            assert exported[1:] == lines(crashed.events[:-1])
        with path.open("ab") as file:
            file.write(line[len(line) // 2 :])
        assert cli("--store", f"jsonl:{root}", command, "crashed", *output) == 0
        if command == "export":
            exported = (tmp_path / "out.jsonl").read_text().splitlines()
            assert exported[1:] == lines(crashed.events[:])
    finally:
        writer.close()
