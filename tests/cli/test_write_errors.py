"""A command whose output cannot be written says so in one line and exits 1; a reader that
goes away (``| head``) ends it quietly, with status 1 too."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from retinue.cli._sessions import to_jsonl
from retinue.session import Session
from retinue.stores import SQLiteStore
from tests.stores._kit import run_turn

DEADLINE = 60.0

FULL = Path("/dev/full")
"""A device every write to fails with ENOSPC, as a full disk's file does."""

full_device = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this platform")


async def _store(path: Path) -> Session:
    session = Session.create("done")
    async with SQLiteStore(path) as store:
        store.attach_new(session)
        run_turn(session, "what is the weather?")
        await store.flush(session)
    return session


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A SQLite store holding the finished session ``done``, and its export beside it."""
    session = trio.run(_store, tmp_path / "sessions.db")
    (tmp_path / "done.jsonl").write_text(to_jsonl(session), encoding="utf-8")
    return f"sqlite:{tmp_path / 'sessions.db'}"


COMMANDS = {
    "version": ["--version"],
    "help": ["--help"],
    "sessions-help": ["sessions", "list", "--help"],
    "list": ["sessions", "list"],
    "show": ["sessions", "show", "done"],
    "export": ["sessions", "export", "done"],
    "replay": ["sessions", "replay", "done"],
    "import": ["sessions", "import", "done.jsonl", "--id", "copy"],
    "demo": ["demo", "--no-live", "--provider", "scripted", "--agents", "1", "--turns", "1"],
}
"""Commands that write to standard output, each short enough to fit in its buffer."""


def _argv(name: str, store: str) -> list[str]:
    argv = COMMANDS[name]
    if argv[0] == "sessions" and "--help" not in argv:
        return [*argv, "--store", store]
    if argv[0] == "demo":
        return [*argv, "--store", "memory"]
    return argv


def _named(argv: list[str]) -> str:
    """The command as its error lines name it."""
    words = ["retinue"]
    if "--help" not in argv and "--version" not in argv:
        words.extend(argv[: 2 if argv[0] == "sessions" else 1])
    return " ".join(words)


def _environment(*, buffered: bool) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return environment if buffered else {**environment, "PYTHONUNBUFFERED": "1"}


@full_device
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_whose_output_cannot_be_written_says_so_and_fails(
    store: str, tmp_path: Path, name: str, *, buffered: bool
) -> None:
    """``> /dev/full``: one line naming the failure, and status 1, for ``--version`` and ``--help``
    too (argparse would drop the error and exit 0); the other commands, buffered, do not fail only
    as the interpreter exits, with a traceback and status 120."""
    argv = _argv(name, store)
    with FULL.open("wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "retinue.cli", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=_environment(buffered=buffered),
            timeout=DEADLINE,
            check=False,
        )
    errors = done.stderr.decode()
    assert (done.returncode, errors) == (
        1,
        f"{_named(argv)}: [Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}\n",
    )


@pytest.mark.parametrize("name", ["version", "help", "list", "show", "replay", "import"])
def test_a_short_output_into_a_closed_pipe_exits_quietly(
    store: str, tmp_path: Path, name: str
) -> None:
    """A reader gone before the output is written (``| head -0``) ends the command with status 1 and
    nothing on stderr, as a long output's does; a short one, buffered, does not fail only as the
    interpreter exits, with a traceback and status 120."""
    command = [sys.executable, "-m", "retinue.cli", *_argv(name, store)]
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=_environment(buffered=True),
    )
    assert child.stdout is not None
    child.stdout.close()  # gone before the child, still importing, writes a byte
    _, errors = child.communicate(timeout=DEADLINE)
    assert (child.returncode, errors) == (1, b"")


CLOSED = {
    "version": "cannot write the version",
    "help": "cannot write the help",
    "sessions-help": "cannot write the help",
    "list": "cannot write the result",
    "show": "cannot write the result",
    "export": "cannot write the result",
    "replay": "cannot write the result",
    "demo": "cannot show the run",
}
"""Commands that write to standard output, and what each says it cannot do when it is closed."""


@pytest.mark.skipif(shutil.which("sh") is None, reason="closes standard output with a shell")
@pytest.mark.parametrize("name", list(CLOSED))
def test_a_command_started_with_standard_output_closed_says_so_and_fails(
    store: str, tmp_path: Path, name: str
) -> None:
    """Started with standard output closed (``>&-``): one line naming it, and status 1,
    ``--version`` and ``--help`` included, which do not write their text to stderr instead and exit
    0."""
    argv = _argv(name, store)
    script = 'exec "$@" >&-'
    done = subprocess.run(
        ["sh", "-c", script, "sh", sys.executable, "-m", "retinue.cli", *argv],
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=_environment(buffered=True),
        timeout=DEADLINE,
        check=False,
    )
    problem = f"[Errno {errno.EBADF}] {CLOSED[name]}: standard output is closed"
    assert (done.returncode, done.stderr.decode()) == (1, f"{_named(argv)}: {problem}\n")
