"""``retinue sessions``: list, show, export, import and replay over a configured store: what each
prints, its errors, closed standard streams."""

from __future__ import annotations

import argparse
import errno
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any, Self

import pytest
import trio

from retinue import MessageSource, Text
from retinue.cli import _sessions
from retinue.cli._sessions import describe
from retinue.session import (
    ContextMessage,
    PromptBlocked,
    Session,
    SessionHeader,
    SteeringMessage,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.stores import JSONLStore, Listing, SQLiteStore
from tests.stores._cli_kit import cli, damage_sqlite_header, fill_sqlite
from tests.stores._kit import lines, run_turn


@pytest.fixture
def stored(tmp_path: Path) -> tuple[str, Session, Session]:
    """A SQLite store with a finished session and one that crashed mid-turn."""
    path = tmp_path / "sessions.db"
    done, crashed = trio.run(fill_sqlite, path)
    return f"sqlite:{path}", done, crashed


@pytest.mark.skipif(sys.platform != "linux", reason="a Linux file name may hold any bytes")
def test_cli_sessions_read_a_sqlite_store_whose_path_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store at a path that is no UTF-8 (the demo writes one there) is read there too:
    the reading commands open it by a URI, which takes the path's own bytes."""
    path = tmp_path / os.fsdecode(b"sessions-\xff.db")
    trio.run(fill_sqlite, path)
    assert cli("--store", f"sqlite:{path}", "list") == 0
    listed = capsys.readouterr().out.splitlines()
    assert sorted(line.split("\t")[0] for line in listed) == ["crashed", "done"]


def test_cli_sessions_list_prints_every_header(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """``sessions list`` prints one line per stored session with its cwd."""
    spec, _, _ = stored
    assert cli("--store", spec, "list") == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split("\t")[0]: line for line in out}
    assert sorted(rows) == ["crashed", "done"]
    assert "cwd=/srv/app" in rows["done"]


def test_cli_sessions_list_prints_a_cwd_ending_in_a_space_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.14: ``sessions list`` prints a stored cwd as stored, a trailing space included, not
    stripped of the line's end, which would show, or hand a script, another cwd."""

    async def fill(path: Path) -> None:
        session = Session.create("spaced", cwd="/srv/app ")
        async with SQLiteStore(path) as store:
            store.attach_new(session)
            run_turn(session)
            await store.flush(session)

    path = tmp_path / "sessions.db"
    trio.run(fill, path)
    assert cli("--store", f"sqlite:{path}", "list") == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.split("\t")[2] == "cwd=/srv/app "


def test_cli_sessions_show_prints_turns_tools_usage_and_ends(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """``sessions show`` renders turns, steps, tool calls with results, usage and end reasons."""
    spec, _, _ = stored
    assert cli("show", "crashed", "--store", spec) == 0
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
    assert cli("--store", spec, "export", "done", "-o", str(exported)) == 0
    text = exported.read_text().splitlines()
    assert text[0].startswith('{"type":"session"')
    assert text[1:] == lines(done.events[:])
    target = tmp_path / "elsewhere"
    assert cli("--store", f"jsonl:{target}", "import", str(exported), "--id", "copy") == 0
    assert cli("--store", f"jsonl:{target}", "import", str(exported), "--id", "copy") == 1
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
    assert cli("--store", spec, "replay", "done") == 0
    assert f"done: ok: {len(done.events)} events, 1 turn," in capsys.readouterr().out
    assert cli("--store", spec, "replay", "crashed") == 0
    assert "ends inside turn 2" in capsys.readouterr().out


def test_cli_sessions_errors_exit_nonzero(
    stored: tuple[str, Session, Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown session is reported on stderr with exit status 1; an unknown store kind
    is a usage error, status 2."""
    spec, _, _ = stored
    assert cli("--store", spec, "show", "missing") == 1
    assert "'missing' is not stored" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        cli("--store", "redis:x", "list")
    assert caught.value.code == 2
    assert "unknown store kind" in capsys.readouterr().err


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
    """R11.13: ``export`` writes UTF-8 JSONL whatever the console's encoding, and ``show`` escapes
    what an ASCII console cannot print; neither crashes with a traceback."""
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


def test_cli_sessions_show_prints_context_steering_and_blocked_prompts() -> None:
    """``sessions show`` renders what was injected, steered in or blocked, and who gave it, so an
    injected note or a vetoed prompt is not invisible there."""
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
    """Stored text (a model's output, a cwd) is shown with its control characters and its
    bidirectional overrides escaped: written raw, an escape sequence in it would drive the
    terminal that shows the log, and an override would show its text reordered."""

    async def fill(path: Path) -> None:
        session = Session.create("s", cwd="/srv/\x1b]0;title\x07app")
        async with SQLiteStore(path) as store:
            store.attach_new(session)
            run_turn(session, "hi \x1b[2J\x00 there\x9b \u202egnp.exe\u2066")
            await store.flush(session)

    path = tmp_path / "sessions.db"
    trio.run(fill, path)
    assert cli("--store", f"sqlite:{path}", "list") == 0
    assert cli("--store", f"sqlite:{path}", "show", "s") == 0
    out = capsys.readouterr().out
    assert "cwd=/srv/\\x1b]0;title\\x07app" in out
    assert "  user: hi \\x1b[2J\\x00 there\\x9b \\u202egnp.exe\\u2066\n" in out
    assert not [char for char in out if unicodedata.category(char) == "Cc" and char not in "\t\n"]


HIDDEN = (
    "\u061c\u200b\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2066\u2067\u2068\u2069\u206a\u206f\ufeff\ufff9\ufffb\U000e0041\U000e007f"
)


def test_cli_sessions_show_escapes_every_bidirectional_and_invisible_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each of Unicode's bidirectional controls and the characters shown as nothing (zero
    widths, the byte order mark, the tag block that can hide a line) is shown escaped; the
    zero-width joiner, which emoji need, is shown as it is."""

    async def fill(path: Path) -> None:
        session = Session.create("s")
        async with SQLiteStore(path) as store:
            store.attach_new(session)
            for char in HIDDEN:
                run_turn(session, f"a{char}b")
            run_turn(session, "\U0001f469\u200d\U0001f4bb")
            await store.flush(session)

    path = tmp_path / "sessions.db"
    trio.run(fill, path)
    assert cli("--store", f"sqlite:{path}", "show", "s") == 0
    out = capsys.readouterr().out
    assert not set(HIDDEN) & set(out)
    for char in HIDDEN:
        code = ord(char)
        escaped = f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
        # The line and paragraph separators are whitespace, which show folds into one space.
        shown = " " if char in "\u2028\u2029" else escaped
        assert f"  user: a{shown}b\n" in out
    assert "  user: \U0001f469\u200d\U0001f4bb\n" in out


def test_cli_sessions_errors_quoting_a_stored_value_escape_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error naming a malformed stored field quotes its value escaped on stderr: a value
    written by another hand must not drive the terminal, where it was written raw."""
    session = Session.create("s")
    run_turn(session, "hi")
    trio.run(_stored_jsonl, tmp_path, session)
    [path] = (tmp_path / "store").rglob("s.jsonl")
    stored = path.read_text()
    path.write_text(
        stored.replace('"kind":"message"', '"kind":"\\u001b]0;pwned\\u0007\\u202eevil"', 1)
    )
    assert cli("--store", f"jsonl:{tmp_path / 'store'}", "show", "s") == 1
    err = capsys.readouterr().err
    assert "\\x1b]0;pwned\\x07\\u202eevil" in err
    assert "\x1b" not in err
    assert "\u202e" not in err


async def _stored_jsonl(root: Path, session: Session) -> None:
    async with JSONLStore(root / "store") as store:
        store.attach_new(session)
        await store.flush(session)


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
    assert cli("--store", spec, *command) == 1
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
    """Started with standard error closed (``2>&-``), a failing command says nothing and exits 1,
    and standard output carries the result alone: no error line goes there for a parser reading the
    listing to take for a session."""
    spec, _, _ = stored
    monkeypatch.setattr(sys, "stderr", None)
    assert cli("--store", f"sqlite:{tmp_path / 'missing.db'}", "list") == 1
    assert cli("--store", spec, "show", "missing") == 1
    assert cli("--store", spec, "import", str(tmp_path / "missing.jsonl")) == 1
    damage_sqlite_header(Path(spec.removeprefix("sqlite:")), "crashed", "{not json")
    assert cli("--store", spec, "list") == 1
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["done"]
