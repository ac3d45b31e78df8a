"""``retinue sessions`` on damaged logs and imports: torn tails and damaged records or headers
reported, files an import refuses naming the line."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
import trio

from retinue.session import Session
from retinue.session._codec import encode_header
from tests.stores._cli_kit import cli, damage_sqlite_header, fill_jsonl, fill_sqlite
from tests.stores._kit import lines
from tests.stores.conftest import jsonl_file


@pytest.fixture
def stored(tmp_path: Path) -> tuple[str, Session, Session]:
    """A SQLite store with a finished session and one that crashed mid-turn."""
    path = tmp_path / "sessions.db"
    done, crashed = trio.run(fill_sqlite, path)
    return f"sqlite:{path}", done, crashed


def _tear_last_records(path: Path, count: int) -> None:
    """Overwrite the last *count* event lines of a session file with garbage, as a torn write."""
    records = path.read_text().splitlines()
    records[-count:] = ['{"seq": 99, "type": "tu'] * count
    path.write_text("\n".join(records) + "\n")


@pytest.mark.parametrize("torn", [2, "all"])
def test_cli_sessions_show_replay_and_export_report_a_torn_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], torn: int | str
) -> None:
    """R11.8: stored records a load would discard as a torn tail are named by ``show``;
    ``replay`` warns and fails; ``export`` writes the events before them, notes them on
    stderr and fails, so a short export is not taken for the whole log."""
    root = tmp_path / "sessions"
    crashed = trio.run(fill_jsonl, root)
    spec = f"jsonl:{root}"
    total = len(crashed.events)
    count = total if torn == "all" else int(torn)
    _tear_last_records(jsonl_file(root, "crashed"), count)
    kept = total - count
    note = (
        f"{count} stored records after seq {kept - 1} are"
        if kept
        else f"all {count} stored records are"
    ) + " a torn tail and were left out"
    assert cli("--store", spec, "show", "crashed") == 0
    out = capsys.readouterr().out
    assert f"events {kept}" in out
    assert f"({note})" in out.splitlines()
    assert cli("--store", spec, "replay", "crashed") == 1
    out = capsys.readouterr().out
    assert f"crashed: warning: {note}\n" in out
    assert f"crashed: kept: {kept} events" in out
    assert "ok:" not in out
    exported = tmp_path / "crashed.jsonl"
    assert cli("--store", spec, "export", "crashed", "-o", str(exported)) == 1
    assert capsys.readouterr().err == f"retinue sessions export: crashed: warning: {note}\n"
    assert exported.read_text().splitlines()[1:] == lines(crashed.events[:kept])


def _tear_last_sqlite_record(path: Path, session_id: str) -> None:
    """Cut the last event record of a session's last segment short."""
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        sid, first, body = conn.execute(
            "SELECT sid, first_seq, body FROM segments JOIN sessions USING (sid) WHERE id = ? "
            "ORDER BY first_seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        records = body.split("\n")
        records[-1] = records[-1][:20]
        conn.execute(
            "UPDATE segments SET body = ? WHERE sid = ? AND first_seq = ?",
            ("\n".join(records), sid, first),
        )


@pytest.mark.parametrize("command", ["show", "replay", "export"])
def test_cli_sessions_name_a_damaged_record_of_a_sqlite_store_and_fail(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """R11.8: SQLite commits each write whole, so a damaged last record is no torn tail: the
    reading commands fail naming the session and the record, and print no log."""
    spec, _, crashed = stored
    _tear_last_sqlite_record(Path(spec.removeprefix("sqlite:")), "crashed")
    assert cli("--store", spec, command, "crashed") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        f"retinue sessions {command}: session 'crashed': event {len(crashed.events) - 1} is corrupt"
    )


def test_cli_sessions_import_skips_blank_lines_and_names_a_bad_line(
    stored: tuple[str, Session, Session], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited export with trailing blank lines imports; a broken line is named by its number."""
    spec, _, _ = stored
    exported = tmp_path / "done.jsonl"
    assert cli("--store", spec, "export", "done", "-o", str(exported)) == 0
    text = exported.read_text()
    exported.write_text(text + "\n\n")
    target = tmp_path / "elsewhere"
    assert cli("--store", f"jsonl:{target}", "import", str(exported), "--id", "copy") == 0
    broken = text.splitlines()
    broken[3] = broken[3].replace('"seq":2', '"seq":"2"')
    exported.write_text("\n".join(broken) + "\n")
    capsys.readouterr()
    assert cli("--store", f"jsonl:{target}", "import", str(exported), "--id", "other") == 1
    assert f"{exported}, line 4: " in capsys.readouterr().err


def test_cli_sessions_import_of_a_file_that_is_not_utf8_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is not UTF-8 is refused in one line naming it, not with a traceback."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type":"session","id":"\xff"}\n')
    assert cli("--store", f"jsonl:{tmp_path / 'store'}", "import", str(bad)) == 1
    error = capsys.readouterr().err
    assert error.startswith("retinue sessions import: ")
    assert f"{bad}, line 1: not UTF-8 text" in error


def test_cli_sessions_import_refuses_a_file_without_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A header alone is refused in one line: a store keeps a session only once it has an
    event, so reporting it imported would be false."""
    header_only = tmp_path / "header.jsonl"
    header_only.write_text(
        '{"type":"session","id":"only-header","created_at":1700000000000,"version":0}\n'
    )
    target = tmp_path / "store"
    assert cli("--store", f"jsonl:{target}", "import", str(header_only)) == 1
    captured = capsys.readouterr()
    assert "imported" not in captured.out
    assert captured.err == f"retinue sessions import: {header_only} has no events to import\n"


@pytest.mark.parametrize(
    ("written", "edited", "problem"),
    [
        ('"version":0', '"version":9', "format version 9 is not the supported version 0"),
        (
            '"cwd":"/srv/app"',
            '"cwd":"srv/app"',
            (
                "session header is malformed: session header cwd must be an absolute path, "
                "got 'srv/app' @ $"
            ),
        ),
    ],
    ids=["format-version", "relative-cwd"],
)
def test_cli_sessions_import_refuses_a_header_no_load_reads(
    stored: tuple[str, Session, Session],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    written: str,
    edited: str,
    problem: str,
) -> None:
    """R11.10, R4.3: a log of another format version, or whose header names a relative cwd, is
    refused at import naming the file and line, and nothing is stored: stored, the first would be
    refused by every load, its id taken for good."""
    spec, _, _ = stored
    exported = tmp_path / "done.jsonl"
    assert cli("--store", spec, "export", "done", "-o", str(exported)) == 0
    text = exported.read_text()
    assert written in text
    exported.write_text(text.replace(written, edited, 1))
    target = tmp_path / "elsewhere"
    assert cli("--store", f"jsonl:{target}", "import", str(exported)) == 1
    assert capsys.readouterr().err == f"retinue sessions import: {exported}, line 1: {problem}\n"
    assert not list(target.rglob("*.jsonl"))


def test_cli_sessions_list_names_each_stored_session_it_skips_and_fails(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.14: ``list`` prints the sessions it can, names on stderr each stored session whose
    header is damaged or names another id, and exits 1, so none goes missing unnoticed."""
    spec, done, _ = stored
    path = Path(spec.removeprefix("sqlite:"))
    damage_sqlite_header(path, "crashed", "{not json")
    assert cli("--store", spec, "list") == 1
    captured = capsys.readouterr()
    assert [line.split("\t")[0] for line in captured.out.splitlines()] == ["done"]
    assert captured.err.startswith(
        "retinue sessions list: skipped session 'crashed': the header is not valid UTF-8 JSON: "
    )
    assert captured.err.count("\n") == 1
    damage_sqlite_header(path, "crashed", encode_header(done.header))
    assert cli("--store", spec, "list") == 1
    assert capsys.readouterr().err == (
        "retinue sessions list: skipped session 'crashed': the stored header names session 'done'\n"
    )


def test_cli_sessions_list_of_jsonl_names_a_damaged_header_a_copy_and_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.14: in a JSONL store, a file whose header is damaged (an editor's BOM), a copy
    under another name (its header names the original), and a directory named like a session
    file are each named on stderr by path; the sessions around them are still listed, and
    the status is 1."""
    root = tmp_path / "sessions"
    trio.run(fill_jsonl, root)
    original = jsonl_file(root, "crashed")
    damaged = original.with_name("damaged.jsonl")
    damaged.write_bytes(b"\xef\xbb\xbf" + original.read_bytes())
    copy = original.with_name("crashed-backup.jsonl")
    copy.write_bytes(original.read_bytes())
    directory = original.with_name("odd.jsonl")
    directory.mkdir()
    assert cli("--store", f"jsonl:{root}", "list") == 1
    captured = capsys.readouterr()
    assert [line.split("\t")[0] for line in captured.out.splitlines()] == ["crashed"]
    skipped = "retinue sessions list: skipped"
    assert captured.err.splitlines() == [
        f"{skipped} {copy}: session 'crashed-backup': the stored header names session 'crashed'",
        (
            f"{skipped} {damaged}: session 'damaged': the header is not valid UTF-8 JSON: "
            "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)"
        ),
        f"{skipped} {directory}: cannot read its header: Is a directory",
    ]


@pytest.mark.parametrize(
    ("edit", "line", "problem"),
    [
        ("duplicate", 7, "seed event has seq 4, expected 5"),
        ("delete", 6, "seed event has seq 5, expected 4"),
    ],
)
def test_cli_sessions_import_names_the_line_of_an_event_out_of_seq_order(
    stored: tuple[str, Session, Session],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: str,
    line: int,
    problem: str,
) -> None:
    """R11.13: an export with a line duplicated or deleted is refused naming the file and the
    line of the first event out of seq order, as a line that does not parse is; nothing is
    stored."""
    spec, _, _ = stored
    exported = tmp_path / "done.jsonl"
    assert cli("--store", spec, "export", "done", "-o", str(exported)) == 0
    records = exported.read_text().splitlines()
    if edit == "duplicate":
        records.insert(5, records[5])
    else:
        del records[5]
    exported.write_text("\n".join(records) + "\n")
    target = tmp_path / "elsewhere"
    assert cli("--store", f"jsonl:{target}", "import", str(exported)) == 1
    assert capsys.readouterr().err == (
        f"retinue sessions import: {exported}, line {line}: session 'done': {problem}\n"
    )
    assert not list(target.rglob("*.jsonl"))
