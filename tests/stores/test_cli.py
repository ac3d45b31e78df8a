"""``retinue sessions``: list, show, export, import and replay over a configured store."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any, Self

import pytest
import trio

from retinue import MessageSource, Text
from retinue.cli import _sessions
from retinue.cli._sessions import add_parser, describe
from retinue.session import (
    ContextMessage,
    PromptBlocked,
    Session,
    SessionHeader,
    SteeringMessage,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.session._codec import encode_event, encode_header
from retinue.stores import JSONLStore, Listing, SQLiteStore
from retinue.stores._jsonl import JSONLBackend
from tests.stores._kit import lines, open_tool_turn, run_turn
from tests.stores.conftest import jsonl_file


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="retinue")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sessions", *argv])
    return int(args.handler(args))


async def _fill(path: Path) -> tuple[Session, Session]:
    done, crashed = Session.create("done", cwd="/srv/app"), Session.create("crashed")
    async with SQLiteStore(path) as store:
        for session in (done, crashed):
            store.attach_new(session)
            run_turn(session, "what is the weather?")
        open_tool_turn(crashed)
        await store.flush(done)
        await store.flush(crashed)
    return done, crashed


@pytest.fixture
def stored(tmp_path: Path) -> tuple[str, Session, Session]:
    """A SQLite store with a finished session and one that crashed mid-turn."""
    path = tmp_path / "sessions.db"
    done, crashed = trio.run(_fill, path)
    return f"sqlite:{path}", done, crashed


@pytest.mark.skipif(sys.platform != "linux", reason="a Linux file name may hold any bytes")
def test_cli_sessions_read_a_sqlite_store_whose_path_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store at a path that is no UTF-8 (the demo writes one there) is read there too:
    the reading commands open it by a URI, which takes the path's own bytes."""
    path = tmp_path / os.fsdecode(b"sessions-\xff.db")
    trio.run(_fill, path)
    assert _cli("--store", f"sqlite:{path}", "list") == 0
    listed = capsys.readouterr().out.splitlines()
    assert sorted(line.split("\t")[0] for line in listed) == ["crashed", "done"]


def test_cli_sessions_list_prints_every_header(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """``sessions list`` prints one line per stored session with its cwd."""
    spec, _, _ = stored
    assert _cli("--store", spec, "list") == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split("\t")[0]: line for line in out}
    assert sorted(rows) == ["crashed", "done"]
    assert "cwd=/srv/app" in rows["done"]


def test_cli_sessions_show_prints_turns_tools_usage_and_ends(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """``sessions show`` renders turns, steps, tool calls with results, usage and end reasons."""
    spec, _, _ = stored
    assert _cli("show", "crashed", "--store", spec) == 0
    out = capsys.readouterr().out
    assert "turn 1  (message from user)" in out
    assert "user: what is the weather?" in out
    assert 'tool call lookup({"city":"Paris"})' in out
    assert "tool result [call-1] ok: sunny" in out
    assert "usage in 10 out 5" in out
    assert "end: completed" in out
    assert "turn 2 is still open" in out


def test_cli_sessions_export_then_import_round_trips(
    stored: tuple[str, Session, Session], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Export writes the R11.13 JSONL shape; importing it elsewhere stores the same events."""
    spec, done, _ = stored
    exported = tmp_path / "done.jsonl"
    assert _cli("--store", spec, "export", "done", "-o", str(exported)) == 0
    text = exported.read_text().splitlines()
    assert text[0].startswith('{"type":"session"')
    assert text[1:] == lines(done.events[:])
    target = tmp_path / "elsewhere"
    assert _cli("--store", f"jsonl:{target}", "import", str(exported), "--id", "copy") == 0
    assert _cli("--store", f"jsonl:{target}", "import", str(exported), "--id", "copy") == 1
    assert "already exists" in capsys.readouterr().err

    async def load() -> Session:
        async with JSONLStore(target) as store:
            return await store.load("copy")

    copy = trio.run(load)
    assert lines(copy.events[:]) == lines(done.events[:])
    assert copy.header.cwd == "/srv/app"


def test_cli_sessions_replay_checks_invariants(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """``sessions replay`` re-derives history, checks the invariants and notes an open turn."""
    spec, done, _ = stored
    assert _cli("--store", spec, "replay", "done") == 0
    assert f"done: ok: {len(done.events)} events, 1 turns" in capsys.readouterr().out
    assert _cli("--store", spec, "replay", "crashed") == 0
    assert "ends inside turn 2" in capsys.readouterr().out


def test_cli_sessions_errors_exit_nonzero(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown session or store kind is reported on stderr with exit status 1."""
    spec, _, _ = stored
    assert _cli("--store", spec, "show", "missing") == 1
    assert "'missing' is not stored" in capsys.readouterr().err
    assert _cli("--store", "redis:x", "list") == 1
    assert "unknown store kind" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["list", "show", "import"])
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_cli_sessions_name_a_store_path_holding_nul(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    """A ``--store`` path no file can have is named in one line, not reported as a missing
    store (read commands) or as a bare "embedded null byte" (import)."""
    source = tmp_path / "in.jsonl"
    source.write_text("")
    location = f"{tmp_path}/a\0b"
    arguments = {"list": (), "show": ("s1",), "import": (str(source),)}[command]
    assert _cli("--store", f"{kind}:{location}", command, *arguments) == 1
    assert capsys.readouterr().err == (
        f"retinue sessions {command}: {kind} store path {location!r} contains a NUL "
        "character, which no file name can hold\n"
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
    assert _cli(*argv) == 1
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
    assert _cli("--store", f"sqlite:{other}", command, *target) == 1
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
    assert _cli("--store", f"sqlite:{empty}", command, *target) == 1
    error = capsys.readouterr().err
    assert (
        error == f"retinue sessions {command}: {empty} is not a retinue store (an empty database)\n"
    )
    assert empty.stat().st_size == 0
    assert [path.name for path in tmp_path.iterdir()] == ["empty.db"]


async def _fill_jsonl(root: Path) -> Session:
    crashed = Session.create("crashed")
    async with JSONLStore(root) as store:
        store.attach_new(crashed)
        run_turn(crashed, "what is the weather?")
        open_tool_turn(crashed)
        await store.flush(crashed)
    return crashed


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
    trio.run(_fill_jsonl, root)
    bucket = jsonl_file(root, "crashed").parent
    (bucket / ".lost.jsonl.0011223344556677.tmp").write_text('{"type":"session"')
    (root / ".lost.creating").write_text('{"type":"session"')
    before = _tree(root)
    target = [] if command == "list" else ["crashed"]
    output = ["-o", str(tmp_path / "out.jsonl")] if command == "export" else []
    assert _cli("--store", f"jsonl:{root}", command, *target, *output) == 0, capsys.readouterr()
    assert _tree(root) == before


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
    crashed = trio.run(_fill_jsonl, root)
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
    assert _cli("--store", spec, "show", "crashed") == 0
    out = capsys.readouterr().out
    assert f"events {kept}" in out
    assert f"({note})" in out.splitlines()
    assert _cli("--store", spec, "replay", "crashed") == 1
    out = capsys.readouterr().out
    assert f"crashed: warning: {note}\n" in out
    assert f"crashed: kept: {kept} events" in out
    assert "ok:" not in out
    exported = tmp_path / "crashed.jsonl"
    assert _cli("--store", spec, "export", "crashed", "-o", str(exported)) == 1
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
    assert _cli("--store", spec, command, "crashed") == 1
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
    assert _cli("--store", spec, "export", "done", "-o", str(exported)) == 0
    text = exported.read_text()
    exported.write_text(text + "\n\n")
    target = tmp_path / "elsewhere"
    assert _cli("--store", f"jsonl:{target}", "import", str(exported), "--id", "copy") == 0
    broken = text.splitlines()
    broken[3] = broken[3].replace('"seq":2', '"seq":"2"')
    exported.write_text("\n".join(broken) + "\n")
    capsys.readouterr()
    assert _cli("--store", f"jsonl:{target}", "import", str(exported), "--id", "other") == 1
    assert f"{exported}, line 4: " in capsys.readouterr().err


def test_cli_sessions_import_of_a_file_that_is_not_utf8_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is not UTF-8 is refused in one line naming it, not with a traceback."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type":"session","id":"\xff"}\n')
    assert _cli("--store", f"jsonl:{tmp_path / 'store'}", "import", str(bad)) == 1
    error = capsys.readouterr().err
    assert error.startswith("retinue sessions import: ")
    assert f"{bad} is not UTF-8 text" in error


async def _fill_long(path: Path, turns: int) -> None:
    session = Session.create("long")
    async with SQLiteStore(path) as store:
        store.attach_new(session)
        for turn in range(turns):
            run_turn(session, f"question {turn}")
        await store.flush(session)


def test_cli_sessions_export_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """A reader that goes away (``| head``) ends the command with status 1 and no traceback."""
    path = tmp_path / "sessions.db"
    trio.run(_fill_long, path, 400)
    command = [sys.executable, "-m", "retinue.cli", "sessions", "--store", f"sqlite:{path}"]
    child = subprocess.Popen(
        [*command, "export", "long"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stdout is not None
    child.stdout.close()  # gone before the child, still importing, writes a byte
    _, errors = child.communicate(timeout=60)
    assert child.returncode == 1
    assert errors == b""


async def _fill_unicode(path: Path) -> Session:
    session = Session.create("snow")
    async with SQLiteStore(path) as store:
        store.attach_new(session)
        run_turn(session, "is it snowing \u2603 or sunny \U0001f31e?")
        await store.flush(session)
    return session


def test_cli_sessions_export_and_show_work_on_an_ascii_console(tmp_path: Path) -> None:
    """R11.13: ``export`` writes UTF-8 JSONL whatever the console's encoding, and ``show``
    escapes what an ASCII console cannot print; both crashed with a traceback."""
    path = tmp_path / "sessions.db"
    session = trio.run(_fill_unicode, path)
    command = [sys.executable, "-m", "retinue.cli", "sessions", "--store", f"sqlite:{path}"]
    ascii_console = {**os.environ, "PYTHONIOENCODING": "ascii"}
    exported = subprocess.run(
        [*command, "export", "snow"],
        capture_output=True,
        env=ascii_console,
        timeout=60,
        check=False,
    )
    assert (exported.returncode, exported.stderr) == (0, b"")
    assert exported.stdout.decode("utf-8") == _sessions.to_jsonl(session)
    shown = subprocess.run(
        [*command, "show", "snow"], capture_output=True, env=ascii_console, timeout=60, check=False
    )
    assert (shown.returncode, shown.stderr) == (0, b"")
    assert b"user: is it snowing \\u2603 or sunny \\U0001f31e?" in shown.stdout


class _Headers:
    """Just enough of a store for ``sessions list``: it lists the given headers."""

    def __init__(self, headers: list[SessionHeader]) -> None:
        self.headers = headers

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await trio.lowlevel.checkpoint()

    async def listing(self) -> Listing:
        await trio.lowlevel.checkpoint()
        return Listing(tuple(self.headers))


@pytest.mark.parametrize(
    "created_at", [-(10**15), 10**17, 2**63 - 1], ids=["before-year-1", "after-9999", "int64-max"]
)
def test_cli_sessions_list_and_show_survive_a_created_at_no_date_has(
    created_at: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """One header whose ``created_at`` is out of any date's range shows its raw milliseconds;
    the rest of the listing is still printed."""
    odd = SessionHeader(id="odd", created_at=created_at)
    fine = SessionHeader(id="fine", created_at=1_700_000_000_000)
    store: Any = _Headers([odd, fine])
    assert trio.run(_sessions._list, store, argparse.Namespace()) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"odd\t{created_at} ms (out of range)", "fine\t2023-11-14 22:13:20Z"]
    first = next(describe(Session.from_events(odd, [])))
    assert first.startswith(f"session odd  created {created_at} ms (out of range)")


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
    assert _cli("--store", f"jsonl:{target}", "import", str(header_only)) == 1
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
    """R11.10, R4.3: a log of another format version, or whose header names a relative
    cwd, is refused at import naming the file and line, and nothing is stored; both used
    to be stored, the first then refused by every load, its id taken for good."""
    spec, _, _ = stored
    exported = tmp_path / "done.jsonl"
    assert _cli("--store", spec, "export", "done", "-o", str(exported)) == 0
    text = exported.read_text()
    assert written in text
    exported.write_text(text.replace(written, edited, 1))
    target = tmp_path / "elsewhere"
    assert _cli("--store", f"jsonl:{target}", "import", str(exported)) == 1
    assert capsys.readouterr().err == f"retinue sessions import: {exported}, line 1: {problem}\n"
    assert not list(target.rglob("*.jsonl"))


def _damage_sqlite_header(path: Path, session_id: str, header: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE sessions SET header = ? WHERE id = ?", (header, session_id))


def test_cli_sessions_list_names_each_stored_session_it_skips_and_fails(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.14: ``list`` prints the sessions it can, names on stderr each stored session whose
    header is damaged or names another id, and exits 1, so none goes missing unnoticed."""
    spec, done, _ = stored
    path = Path(spec.removeprefix("sqlite:"))
    _damage_sqlite_header(path, "crashed", "{not json")
    assert _cli("--store", spec, "list") == 1
    captured = capsys.readouterr()
    assert [line.split("\t")[0] for line in captured.out.splitlines()] == ["done"]
    assert captured.err.startswith(
        "retinue sessions list: skipped session 'crashed': the header is not valid UTF-8 JSON: "
    )
    assert captured.err.count("\n") == 1
    _damage_sqlite_header(path, "crashed", encode_header(done.header))
    assert _cli("--store", spec, "list") == 1
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
    trio.run(_fill_jsonl, root)
    original = jsonl_file(root, "crashed")
    damaged = original.with_name("damaged.jsonl")
    damaged.write_bytes(b"\xef\xbb\xbf" + original.read_bytes())
    copy = original.with_name("crashed-backup.jsonl")
    copy.write_bytes(original.read_bytes())
    directory = original.with_name("odd.jsonl")
    directory.mkdir()
    assert _cli("--store", f"jsonl:{root}", "list") == 1
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
    assert _cli("--store", spec, "export", "done", "-o", str(exported)) == 0
    records = exported.read_text().splitlines()
    if edit == "duplicate":
        records.insert(5, records[5])
    else:
        del records[5]
    exported.write_text("\n".join(records) + "\n")
    target = tmp_path / "elsewhere"
    assert _cli("--store", f"jsonl:{target}", "import", str(exported)) == 1
    assert capsys.readouterr().err == (
        f"retinue sessions import: {exported}, line {line}: session 'done': {problem}\n"
    )
    assert not list(target.rglob("*.jsonl"))


def test_cli_sessions_show_prints_context_steering_and_blocked_prompts() -> None:
    """``sessions show`` renders what was injected, steered in or blocked, and who gave it:
    they were left out, so an injected note or a vetoed prompt was invisible there."""
    session = Session.create("s")
    plugin = MessageSource("plugin", "notes")
    session.append(TurnStart(1, TurnTrigger("injection", plugin)))
    session.append(ContextMessage((Text("remember the key"),), plugin), surface="append")
    session.append(TurnEnd(1, TurnEndReason.completed()))
    session.append(TurnStart(2, TurnTrigger("message")))
    session.append(PromptBlocked((Text("rm -rf /"),), reason="unsafe"))
    session.append(UserMessage("hello"), surface="append")
    session.append(SteeringMessage(2, (Text("be brief"),)), surface="append")
    session.append(TurnEnd(2, TurnEndReason.completed()))
    shown = list(describe(session))
    assert "  context (from notes): remember the key" in shown
    assert "  blocked: rm -rf /  [unsafe]" in shown
    assert "  steering: be brief" in shown


def test_cli_sessions_show_and_list_escape_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stored text (a model's output, a cwd) is shown with its control characters escaped:
    written raw, an escape sequence in it would drive the terminal that shows the log."""

    async def fill(path: Path) -> None:
        session = Session.create("s", cwd="/srv/\x1b]0;title\x07app")
        async with SQLiteStore(path) as store:
            store.attach_new(session)
            run_turn(session, "hi \x1b[2J\x00 there\x9b")
            await store.flush(session)

    path = tmp_path / "sessions.db"
    trio.run(fill, path)
    assert _cli("--store", f"sqlite:{path}", "list") == 0
    assert _cli("--store", f"sqlite:{path}", "show", "s") == 0
    out = capsys.readouterr().out
    assert "cwd=/srv/\\x1b]0;title\\x07app" in out
    assert "  user: hi \\x1b[2J\\x00 there\\x9b\n" in out
    assert not [char for char in out if unicodedata.category(char) == "Cc" and char not in "\t\n"]


@pytest.mark.parametrize(
    "command", [["list"], ["show", "done"], ["export", "done"], ["export", "done", "--output", ""]]
)
def test_cli_sessions_report_a_closed_standard_output(
    stored: tuple[str, Session, Session],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    """Started with standard output closed (``>&-``), a command whose result goes there
    says so and exits 1: ``export`` (to standard output, as with an empty ``--output``)
    failed with a traceback, ``list`` and ``show`` exited 0 having shown nothing."""
    spec, _, _ = stored
    monkeypatch.setattr(sys, "stdout", None)
    assert _cli("--store", spec, *command) == 1
    assert capsys.readouterr().err == (
        f"retinue sessions {command[0]}: [Errno {errno.EBADF}] cannot write the result: "
        "standard output is closed\n"
    )


def test_cli_sessions_keep_standard_output_for_the_result_when_standard_error_is_closed(
    stored: tuple[str, Session, Session],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Started with standard error closed (``2>&-``), a failing command says nothing and
    exits 1, and standard output carries the result alone: the error lines went there,
    where a parser reading the listing took them for sessions."""
    spec, _, _ = stored
    monkeypatch.setattr(sys, "stderr", None)
    assert _cli("--store", f"sqlite:{tmp_path / 'missing.db'}", "list") == 1
    assert _cli("--store", spec, "show", "missing") == 1
    assert _cli("--store", spec, "import", str(tmp_path / "missing.jsonl")) == 1
    _damage_sqlite_header(Path(spec.removeprefix("sqlite:")), "crashed", "{not json")
    assert _cli("--store", spec, "list") == 1
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["done"]


@pytest.mark.parametrize("command", ["show", "export", "replay"])
def test_cli_sessions_read_a_live_session_up_to_its_last_complete_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """R11.8: a session whose writer is live, its last write only partly in the file yet,
    is read up to its last complete line: the unfinished line is not yet written, not a torn
    tail, so nothing is reported and the status is 0. Once written, the line is read."""
    root = tmp_path / "sessions"
    crashed = trio.run(_fill_jsonl, root)
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
        assert _cli("--store", f"jsonl:{root}", command, "crashed", *output) == 0
        captured = capsys.readouterr()
        assert "torn" not in captured.out + captured.err
        if command == "export":
            exported = (tmp_path / "out.jsonl").read_text().splitlines()
            assert exported[1:] == lines(crashed.events[:-1])
        with path.open("ab") as file:
            file.write(line[len(line) // 2 :])
        assert _cli("--store", f"jsonl:{root}", command, "crashed", *output) == 0
        if command == "export":
            exported = (tmp_path / "out.jsonl").read_text().splitlines()
            assert exported[1:] == lines(crashed.events[:])
    finally:
        writer.close()
