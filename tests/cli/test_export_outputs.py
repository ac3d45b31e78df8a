"""``sessions export -o`` writes whatever file it is given as ``open(path, "w")`` would:
a FIFO once read, a pipe reached as ``/dev/stdout``, a file emptied through its hard link,
and a file it may not write refused."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.session import Session
from tests.stores._kit import run_turn

DEADLINE = 60.0

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/stdout are POSIX")


@pytest.fixture
def exported(tmp_path: Path) -> str:
    """The JSONL text of the session ``s1``, stored in ``s.db`` under *tmp_path*."""
    session = Session.create("s1")
    run_turn(session, "what is the weather?")
    text = to_jsonl(session)
    (tmp_path / "s1.jsonl").write_text(text, encoding="utf-8")
    store = f"sqlite:{tmp_path / 's.db'}"
    assert main(["sessions", "import", str(tmp_path / "s1.jsonl"), "--store", store]) == 0
    return text


def _export(tmp_path: Path, output: Path | str) -> int:
    store = f"sqlite:{tmp_path / 's.db'}"
    return main(["sessions", "export", "s1", "--store", store, "-o", str(output)])


@posix_only
def test_export_to_a_fifo_is_written_whole_to_its_reader(tmp_path: Path, exported: str) -> None:
    """A reader waiting on the FIFO gets the whole export, and the command ends with 0."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert _export(tmp_path, fifo) == 0
    reader.join(DEADLINE)
    assert received == [exported.encode("utf-8")]


@posix_only
@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="no /dev/stdout")
def test_export_to_dev_stdout_writes_into_the_pipe(tmp_path: Path, exported: str) -> None:
    """``-o /dev/stdout | reader``: the reader gets the export, and the status is 0."""
    store = f"sqlite:{tmp_path / 's.db'}"
    command = [sys.executable, "-m", "retinue.cli", "sessions", "export", "s1"]
    done = subprocess.run(
        [*command, "--store", store, "-o", "/dev/stdout"],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert (done.returncode, done.stdout.decode("utf-8"), done.stderr) == (0, exported, b"")


def test_export_over_a_file_empties_it_through_its_hard_links(
    tmp_path: Path, exported: str
) -> None:
    """A longer file is emptied first, and a hard link to it still names it."""
    output = tmp_path / "out.jsonl"
    output.write_text("x" * 2 * len(exported), encoding="utf-8")
    link = tmp_path / "link.jsonl"
    os.link(output, link)
    assert _export(tmp_path, link) == 0
    assert output.read_text(encoding="utf-8") == exported
    assert output.samefile(link)


# As root the export runs with the capabilities that let root write any file dropped, so
# the file's mode decides, as for any user.
_AS_A_USER = (
    ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    if sys.platform != "win32" and os.geteuid() == 0
    else []
)


@posix_only
def test_export_over_a_read_only_file_is_refused(tmp_path: Path, exported: str) -> None:
    """A file the user may not write: status 1, one line naming it, the file as it was."""
    output = tmp_path / "read-only.jsonl"
    output.write_text("kept\n", encoding="utf-8")
    output.chmod(0o444)
    store = f"sqlite:{tmp_path / 's.db'}"
    command = [sys.executable, "-m", "retinue.cli", "sessions", "export", "s1", "--store", store]
    done = subprocess.run(
        [*_AS_A_USER, *command, "-o", str(output)],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert (done.returncode, done.stderr.decode("utf-8")) == (
        1,
        f"retinue sessions export: [Errno 13] Permission denied: '{output}'\n",
    )
    assert output.read_text(encoding="utf-8") == "kept\n"


# Holds a read lease on the file LEASED, which it lets go of when the kernel asks it to
# (SIGIO, as another process opens the file for writing), as a file server's lease is.
LEASE_HOLDER = """
import fcntl, os, signal, sys

descriptor = os.open(os.environ["LEASED"], os.O_RDONLY)


def let_go(_signal, _frame):
    fcntl.fcntl(descriptor, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    sys.exit(0)


signal.signal(signal.SIGIO, let_go)
fcntl.fcntl(descriptor, fcntl.F_SETLEASE, fcntl.F_RDLCK)
sys.stdout.write("leased\\n")
sys.stdout.flush()
signal.pause()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="file leases are Linux's")
def test_export_over_a_leased_file_waits_for_the_lease_to_go(tmp_path: Path, exported: str) -> None:
    """A file another process holds a lease on is written once the lease is given up, as
    ``open(path, "w")`` waits for it, not failed at once (EAGAIN) with status 1."""
    output = tmp_path / "leased.jsonl"
    output.write_text("kept\n", encoding="utf-8")
    env = {**os.environ, "LEASED": str(output)}
    with subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER], env=env, stdout=subprocess.PIPE
    ) as holder:
        assert holder.stdout is not None
        try:
            assert holder.stdout.readline() == b"leased\n"
            assert _export(tmp_path, output) == 0
            assert holder.wait(DEADLINE) == 0
        finally:
            holder.kill()
    assert output.read_text(encoding="utf-8") == exported
