"""Ctrl-C during ``retinue sessions``: status 130 and the usual line, saying what was stored."""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from retinue import StoreError
from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.session import Session
from retinue.stores._backend import AppendBatch
from retinue.stores._sqlite import SQLiteBackend
from tests.stores._kit import run_turn

DEADLINE = 60.0

ROOT = Path(__file__).resolve().parents[2]

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is a POSIX signal")

# Loaded by the child at startup: as it first opens the file WATCHED names, however it opens
# it, it says so on stderr. SIGINT raises KeyboardInterrupt, as in a terminal, even when
# the test runs where it is ignored (a background job).
ANNOUNCE_OPEN = """
import os, signal, sys

signal.signal(signal.SIGINT, signal.default_int_handler)
announced = []


def hook(event, args):
    if event == "open" and not announced and str(args[0]) == os.environ["WATCHED"]:
        announced.append(True)
        sys.stderr.write("opening\\n")
        sys.stderr.flush()


sys.addaudithook(hook)
"""


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in a terminal, even where the tests run with it
    ignored (a background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run(argv: Sequence[str]) -> int:
    try:
        return main(list(argv))
    except BaseException as escaped:  # an escaped interrupt would end the whole test run
        pytest.fail(f"the interrupt escaped: {escaped!r}")


@posix_only
@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_just_after_an_import_committed_says_it_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C landing as the SQLite commit that stores the import returns ends the command as
    interrupted (130), its confirmation saying the session is stored, as the store then lists it,
    not "interrupted" alone, as if nothing were stored."""
    session = Session.create("s1")
    run_turn(session, "what is the weather?")
    exported = tmp_path / "s1.jsonl"
    exported.write_text(to_jsonl(session), encoding="utf-8")
    write = SQLiteBackend.write

    def write_then_interrupt(
        backend: SQLiteBackend, batches: Sequence[AppendBatch]
    ) -> list[StoreError | None]:
        results = write(backend, batches)
        os.kill(os.getpid(), signal.SIGINT)
        return results

    monkeypatch.setattr(SQLiteBackend, "write", write_then_interrupt)
    store = f"sqlite:{tmp_path / 's.db'}"
    assert _run(["sessions", "import", str(exported), "--store", store]) == 130
    assert capsys.readouterr() == (
        f"imported s1 ({len(session.events)} events)\n",
        "retinue sessions import: interrupted\n",
    )
    monkeypatch.undo()
    assert _run(["sessions", "list", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("s1\t")


@pytest.fixture
def stored(tmp_path: Path) -> str:
    """A SQLite store holding the finished session ``s1``."""
    session = Session.create("s1")
    run_turn(session, "what is the weather?")
    exported = tmp_path / "s1.jsonl"
    exported.write_text(to_jsonl(session), encoding="utf-8")
    store = f"sqlite:{tmp_path / 's.db'}"
    assert _run(["sessions", "import", str(exported), "--store", store]) == 0
    return store


def _interrupted_at_open(tmp_path: Path, fifo: Path, argv: Sequence[str]) -> tuple[int, bytes]:
    """Run ``retinue`` with *argv* in a child, Ctrl-C as it opens *fifo*; its status and stderr."""
    os.mkfifo(fifo)
    (tmp_path / "sitecustomize.py").write_text(ANNOUNCE_OPEN)
    path = os.pathsep.join([str(tmp_path), str(ROOT / "src")])
    env = {**os.environ, "PYTHONPATH": path, "WATCHED": str(fifo)}
    command = [sys.executable, "-m", "retinue.cli", *argv]
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as child:
        assert child.stderr is not None
        try:
            assert child.stderr.readline() == b"opening\n"
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=DEADLINE)
        finally:
            child.kill()
    assert out == b""
    return child.returncode, err


@posix_only
def test_ctrl_c_while_an_export_waits_for_a_fifo_reader_ends_it(
    tmp_path: Path, stored: str
) -> None:
    """``export -o FIFO`` that no one reads waits for a reader, and Ctrl-C ends the wait: status 130
    and the usual line. The open does not block in the OS, which would keep Ctrl-C waiting with it
    until a reader came."""
    fifo = tmp_path / "fifo"
    argv = ["sessions", "export", "s1", "--store", stored, "-o", str(fifo)]
    assert _interrupted_at_open(tmp_path, fifo, argv) == (
        130,
        b"retinue sessions export: interrupted\n",
    )


@posix_only
def test_ctrl_c_while_an_import_waits_for_a_fifo_writer_ends_it(tmp_path: Path) -> None:
    """``import FIFO`` (``import <(command)``) waits for the writer, and Ctrl-C ends the wait:
    status 130, the usual line, nothing stored. The open does not block in the OS, which would keep
    Ctrl-C waiting with it until a writer came and was done."""
    fifo = tmp_path / "fifo"
    store = tmp_path / "store"
    argv = ["sessions", "import", str(fifo), "--store", f"jsonl:{store}"]
    assert _interrupted_at_open(tmp_path, fifo, argv) == (
        130,
        b"retinue sessions import: interrupted\n",
    )
    assert not list(store.rglob("*.jsonl"))


# The read syscall's number, by machine: a thread blocked reading shows it first in
# /proc/PID/task/TID/syscall, with the descriptor after it.
_READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}.get(platform.machine())


def _reads_standard_input(pid: int) -> bool:
    """Whether a thread of process *pid* is blocked reading its standard input (through
    descriptor 0 or a copy of it)."""
    fds = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        standard_input = os.readlink(fds / "0")
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                number, descriptor = (task / "syscall").read_text().split()[:2]
                read_from = fds / str(int(descriptor, 16))
                if number == _READ_SYSCALL and os.readlink(read_from) == standard_input:
                    return True
    return False


def _interrupted_reading_standard_input(argv: Sequence[str]) -> tuple[int, bytes]:
    """Run ``retinue`` with *argv* in a child whose standard input is a pipe left open until
    it exits, Ctrl-C once it reads it; its status and stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "retinue.cli", *argv]
    with subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as child:
        assert child.stdout is not None
        assert child.stderr is not None
        try:
            _wait_until_reading(child)
            child.send_signal(signal.SIGINT)
            # Not communicate(): it would close the pipe, ending the read it waits in.
            child.wait(timeout=DEADLINE)
        finally:
            child.kill()
        assert child.stdout.read() == b""
        return child.returncode, child.stderr.read()


def _wait_until_reading(child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not _reads_standard_input(child.pid):
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=0.01)
            pytest.fail(f"the command ended before it read standard input: {child.returncode}")
        assert time.monotonic() < deadline, "the command never read standard input"


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or _READ_SYSCALL is None,
    reason="reads /proc/PID/task/TID/syscall to see the read begin",
)
def test_ctrl_c_while_an_import_reads_standard_input_ends_it(tmp_path: Path) -> None:
    """``import -`` waiting on standard input (a terminal, a slow producer) ends on Ctrl-C with
    status 130 and the usual line, nothing stored. An abandoned read must not hold standard input's
    lock, which the interpreter waits for as it closes it at exit: Python would abort."""
    store = tmp_path / "store"
    argv = ["sessions", "import", "-", "--store", f"jsonl:{store}"]
    assert _interrupted_reading_standard_input(argv) == (
        130,
        b"retinue sessions import: interrupted\n",
    )
    assert not list(store.rglob("*.jsonl"))
