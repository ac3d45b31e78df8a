"""``retinue demo``: the README's main command draws a table that follows the agents.

The table, the summary and the closing hint as a terminal, a pipe or a console shows
them, a run that fails, and standard streams that are closed.
"""

from __future__ import annotations

import errno
import io
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import trio

from retinue.cli import _demo_board, _demo_hint, _demo_models, main
from retinue.cli._demo import run_demo
from retinue.testing import FinishWithError, ScriptedModel
from tests.cli._demo_kit import demo_args

REAL_DEADLINE = 60.0


async def test_the_last_table_shows_every_agents_turns(capsys: pytest.CaptureFixture[str]) -> None:
    """Against the embedded mock server, the table is drawn until every agent has finished."""
    with trio.fail_after(REAL_DEADLINE):
        assert await run_demo(demo_args()) == 0
    out = capsys.readouterr().out
    last_table = out[out.rindex("retinue demo:") :]
    rows = re.findall(r"agent-(\d\d)\s*│\s*(\w+)\s*│\s*(\d+)\s*│\s*(\d+)", last_table)
    assert [(agent, status) for agent, status, _, _ in rows] == [
        ("00", "idle"),
        ("01", "idle"),
        ("02", "idle"),
    ]
    turns = sum(int(count) for _, _, count, _ in rows)
    assert all(int(count) >= 1 for _, _, count, _ in rows)
    assert f"3 agents, {turns} turns" in out


async def test_demo_fails_when_no_turn_completes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model that fails every call (a bad key or model name) is a failed demo, named once."""
    monkeypatch.setattr(_demo_models, "scripted_model", lambda _latency: ScriptedModel([]))
    with trio.fail_after(REAL_DEADLINE):
        status = await run_demo(demo_args(provider="scripted", no_live=True))
    captured = capsys.readouterr()
    assert status == 1
    assert "end reasons: error" in captured.out
    assert captured.err.startswith("retinue demo: no turn completed; the first error: ")
    assert "has 0 step(s) and all were played" in captured.err


async def test_demo_of_one_turn_fails_when_it_does_not_complete(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A single turn is not cancelled by the demo's operator: a model that fails it (a bad key) is a
    failed demo, not a turn cancelled first and a demo reported as a success."""
    failing = ScriptedModel([FinishWithError("invalid api key", delay=0.2)])
    monkeypatch.setattr(_demo_models, "scripted_model", lambda _latency: failing)
    with trio.fail_after(REAL_DEADLINE):
        status = await run_demo(demo_args(provider="scripted", agents=1, turns=1, no_live=True))
    captured = capsys.readouterr()
    assert status == 1
    assert "aborted" not in captured.out
    assert "end reasons: error" in captured.out
    assert "invalid api key" in captured.err


async def test_demo_escapes_control_characters_in_the_first_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A provider's error text is shown with its control characters escaped, as stored
    text is: written raw, an escape sequence from the provider drove the terminal."""
    failing = ScriptedModel([FinishWithError("bad key \x1b]0;title\x07\x1b[2J\x9b", delay=0.2)])
    monkeypatch.setattr(_demo_models, "scripted_model", lambda _latency: failing)
    with trio.fail_after(REAL_DEADLINE):
        status = await run_demo(demo_args(provider="scripted", agents=1, turns=1, no_live=True))
    err = capsys.readouterr().err
    assert status == 1
    assert err.endswith("the first error: bad key \\x1b]0;title\\x07\\x1b[2J\\x9b\n")
    assert not [char for char in err if unicodedata.category(char) == "Cc" and char != "\n"]


def test_the_live_table_shows_as_many_agents_as_fit_and_sums_the_rest() -> None:
    """Thousands of rows redrawn ten times a second cost more than the agents ran; the
    table fits its terminal, its last row summing the agents it leaves out."""
    board = _demo_board.Board()
    for index in range(1000):
        board.rows[f"agent-{index:04}-session-x"] = _demo_board.Row(status="idle", turns=2, steps=4)
    table = board.table(0.0, height=30)
    assert table.row_count == 22
    rest = [cell for column in table.columns for cell in list(column.cells)[-1:]]
    assert rest == ["… 979 more", "idle 979", "1958", "3916", "0", ""]
    assert board.table(0.0, height=2000).row_count == 1000
    assert board.table(0.0, height=None).row_count == 1000  # piped: every row


def test_demo_names_its_store_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The closing hint names the store exactly, and gives the command on one line, quoted for a
    shell, even piped and with brackets in its path: read as console markup, brackets would be
    dropped or fail the run after it had stored its sessions, and ``jsonl:notes`` would show as
    ``jsonl`` and a note emoji."""
    monkeypatch.chdir(tmp_path)
    for directory in ("out[bold]x", "a[/x]" + "y" * 60, "notes"):
        spec = f"jsonl:{directory}" if directory == "notes" else f"jsonl:{tmp_path / directory}"
        argv = ["--provider", "scripted", "--latency", "0", "--agents", "1", "--turns", "1"]
        assert main(["demo", "--no-live", "--store", spec, *argv]) == 0
        captured = capsys.readouterr()
        quoted = spec if directory == "notes" else f"'{spec}'"
        assert f"stored in {spec}: try `retinue sessions list --store {quoted}`\n" in captured.out
        assert captured.err == ""


@pytest.mark.skipif(sys.platform != "linux", reason="a Linux file name may hold any bytes")
def test_demo_hint_gives_a_store_path_that_is_not_utf8_as_a_shell_can_take_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path holding bytes no UTF-8 text has, or a control character, is given in ANSI-C quoting,
    as the bytes it is, not quoted as the text ``os.fsdecode`` makes of it, ``\\udcff``, which names
    another file, nor with a control character sent to the terminal. The name shown before it is
    escaped as the sessions commands escape it."""
    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"it's-\xffa\x1b")
    argv = ["--provider", "scripted", "--latency", "0", "--agents", "1", "--turns", "1"]
    assert main(["demo", "--no-live", "--store", f"jsonl:{name}", *argv]) == 0
    captured = capsys.readouterr()
    hint = captured.out.splitlines()[-1]
    word = "$'jsonl:it\\'s-\\xff'$'a\\x1b'"
    shown = "jsonl:it's-\\udcffa\\x1b"
    assert hint == f"sessions stored in {shown}: try `retinue sessions list --store {word}`"
    assert captured.err == ""
    if shutil.which("bash") is not None:  # ANSI-C quoting: bash, zsh, ksh; POSIX since 2024
        pasted = subprocess.run(
            ["bash", "-c", f"printf %s {word}"], capture_output=True, timeout=10, check=True
        )
        assert pasted.stdout == b"jsonl:it's-\xffa\x1b"
    assert _demo_hint.shell_word("jsonl:plain dir") == "'jsonl:plain dir'"


@pytest.mark.parametrize("live", [True, False], ids=["live", "no-live"])
def test_demo_into_a_closed_pipe_exits_quietly(*, live: bool) -> None:
    """A reader that goes away (``| head``) ends the demo with status 1 and nothing on stderr, as it
    ends the sessions commands, with the live table too, whose task runs in a nursery: no traceback
    of an exception group."""
    argv = ["--store", "memory", "--provider", "scripted", "--agents", "2", "--turns", "1"]
    command = [sys.executable, "-m", "retinue.cli", "demo", *argv, *([] if live else ["--no-live"])]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.close()  # gone before the child, still importing, writes a byte
    _, errors = child.communicate(timeout=REAL_DEADLINE)
    assert (child.returncode, errors) == (1, b"")


async def test_the_summary_is_one_line_even_piped(capsys: pytest.CaptureFixture[str]) -> None:
    """The summary, the run's record, is one line to grep: piped, it is not wrapped at 80 columns,
    which would split an end reason from its count."""
    with trio.fail_after(REAL_DEADLINE):
        assert await run_demo(demo_args(provider="scripted", agents=2, turns=1, no_live=True)) == 0
    summary = [line for line in capsys.readouterr().out.splitlines() if "summary" in line]
    assert len(summary) == 1
    assert re.fullmatch(
        r"summary: 2 agents, \d+ turns, .* events; end reasons: .*; wall time [\d.]+s", summary[0]
    )


def test_demo_reports_a_closed_standard_output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Started with standard output closed (``>&-``), the demo says so and exits 1, as the sessions
    commands do, rather than running to the end showing nothing and exiting 0."""
    monkeypatch.setattr(sys, "stdout", None)
    argv = ["--store", "memory", "--provider", "scripted", "--agents", "1", "--turns", "1"]
    assert main(["demo", "--no-live", *argv]) == 1
    assert capsys.readouterr().err == (
        f"retinue demo: [Errno {errno.EBADF}] cannot show the run: standard output is closed\n"
    )


def test_no_live_help_names_every_line_the_demo_still_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--no-live leaves out the live table only: the summary and, for a stored run, the closing
    ``retinue sessions list`` hint are still printed, and its help says so (not "print only the
    summary")."""
    monkeypatch.chdir(tmp_path)
    argv = ["--provider", "scripted", "--latency", "0", "--agents", "1", "--turns", "1"]
    assert main(["demo", "--no-live", "--store", "jsonl:notes", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["", "summary", "sessions stored in jsonl"]
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    usage = " ".join(capsys.readouterr().out.split())
    no_live = usage[usage.rindex("--no-live") :]
    assert "live table" in no_live
    assert "summary" in no_live
    assert "retinue sessions list" in no_live


@pytest.mark.parametrize("columns", ["0", "00"])
def test_demo_prints_its_summary_when_columns_is_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], columns: str
) -> None:
    """``COLUMNS=0`` (as some containers set it for a process with no terminal) counts as unset: the
    table and the summary are drawn as wide as the terminal, 80 columns without one, rather than
    nothing printed at all and an exit status of 0."""
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.delenv("LINES", raising=False)
    argv = ["--store", "memory", "--provider", "scripted", "--latency", "0"]
    assert main(["demo", *argv, "--agents", "1", "--turns", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^summary: 1 agent, ", out, re.MULTILINE)
    assert re.search(r"^│ agent-00 +│ idle +│ 1 ", out, re.MULTILINE)


@pytest.mark.skipif(sys.platform != "linux", reason="a Linux file name may hold any bytes")
def test_demo_hint_gives_a_store_path_its_console_cannot_show_as_a_shell_can_take_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a console whose encoding lacks a character of the store's path (ASCII, say), the hint
    gives that character in ANSI-C quoting as its bytes, not ``\\xe9`` inside plain quotes, which a
    shell takes as four characters, naming another store."""
    monkeypatch.chdir(tmp_path)
    written = io.BytesIO()
    console = io.TextIOWrapper(written, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", console)
    argv = ["--provider", "scripted", "--latency", "0", "--agents", "1", "--turns", "1"]
    assert main(["demo", "--no-live", "--store", "jsonl:café", *argv]) == 0
    console.flush()
    hint = written.getvalue().decode("ascii").splitlines()[-1]
    word = "$'jsonl:caf\\xc3\\xa9'"
    assert hint == f"sessions stored in jsonl:caf\\xe9: try `retinue sessions list --store {word}`"
    if shutil.which("bash") is not None:
        pasted = subprocess.run(
            ["bash", "-c", f"printf %s {word}"], capture_output=True, timeout=10, check=True
        )
        assert pasted.stdout == "jsonl:café".encode()
    assert (tmp_path / "café").is_dir()


def test_demo_live_table_shows_its_agents_when_lines_is_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``LINES=0`` counts as unset too: on a terminal the live table fits the terminal's height, 24
    lines without one, and shows every agent's row, not only the one summing them."""
    monkeypatch.setenv("LINES", "0")
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then takes the output for a terminal
    monkeypatch.delenv("NO_COLOR", raising=False)
    argv = ["--store", "memory", "--provider", "scripted", "--latency", "0"]
    assert main(["demo", *argv, "--agents", "3", "--turns", "1"]) == 0
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", capsys.readouterr().out)
    assert re.search(r"│ agent-02 +│ idle +│ 1 ", out)
    assert "3 more" not in out


def _script(directory: Path) -> Path:
    directory.mkdir()
    script = directory / "retinue"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_demo_hint_names_the_program_as_it_was_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``.venv/bin/retinue demo`` in a venv never activated, a bare ``retinue`` is not
    found: the hint's command runs retinue as the demo was run, by its path, or by the
    interpreter for ``python -m retinue``; ``retinue`` when that name finds this program."""
    venv = _script(tmp_path / "venv bin")
    other = _script(tmp_path / "other")
    python = "/opt/py thon/bin/python3"
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert _demo_hint.invoked_as(str(venv), python) == f"'{venv}'"
    monkeypatch.setenv("PATH", str(other.parent))
    assert _demo_hint.invoked_as(str(venv), python) == f"'{venv}'"
    monkeypatch.setenv("PATH", str(venv.parent))
    assert _demo_hint.invoked_as(str(venv), python) == "retinue"
    main_module = str(Path(_demo_hint.__file__).parent.parent / "__main__.py")
    assert _demo_hint.invoked_as(main_module, python) == f"'{python}' -m retinue"
    cli_module = str(Path(_demo_hint.__file__).parent / "__main__.py")
    assert _demo_hint.invoked_as(cli_module, python) == f"'{python}' -m retinue.cli"
    assert _demo_hint.invoked_as("/srv/app/__main__.py", python) == "retinue"
    # Another package's ``retinue/cli/__main__.py`` (a project folder of that name) is not ours.
    other_cli = tmp_path / "retinue" / "cli"
    other_cli.mkdir(parents=True)
    for main_file in (other_cli.parent / "__main__.py", other_cli / "__main__.py"):
        main_file.write_text("", encoding="utf-8")
        assert _demo_hint.invoked_as(str(main_file), python) == "retinue"
    assert _demo_hint.invoked_as("/usr/lib/python3/pytest", python) == "retinue"
    hint = _demo_hint.closing_hint("sqlite:s.db", program=_demo_hint.invoked_as(str(venv), python))
    assert hint == "sessions stored in sqlite:s.db: try `retinue sessions list --store sqlite:s.db`"


def test_demo_run_by_a_path_outside_the_path_hints_that_path(tmp_path: Path) -> None:
    """The README's ``.venv/bin/retinue demo``, run for real: its last line's command is
    ``.venv/bin/retinue sessions list ...``, which runs from where the demo ran."""
    script = Path(sys.executable).parent / "retinue"
    if not script.exists():
        pytest.skip("retinue is not installed as a console script beside this Python")
    env = {**os.environ, "PATH": str(tmp_path / "none")}

    def run(*args: str) -> bytes:
        done = subprocess.run(
            [str(script), *args],
            check=False,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    demo = ["demo", "--no-live", "--provider", "scripted", "--latency", "0", "--agents", "1"]
    printed = run(*demo, "--store", "sqlite:s.db", "--turns", "1")
    last = printed.decode().splitlines()[-1]
    command = f"{_demo_hint.shell_word(str(script))} sessions list --store sqlite:s.db"
    assert last == f"sessions stored in sqlite:s.db: try `{command}`"
    listed = run("sessions", "list", "--store", "sqlite:s.db")
    [(session_id, *_)] = [line.split() for line in listed.decode().splitlines()]
    assert session_id.startswith("agent-00-session-")
