"""scripts/postgres.sh: a step failing after the server started stops that server.

The caller gets no directory to stop it with when the script fails, so a server
left running would run until the machine stops. Each test starts a real server
with the PostgreSQL binaries the script finds itself (skipped where there are
none: the script would install them), and makes a later step fail through a
command it runs, shadowed on the PATH.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "postgres.sh"
SCRIPT_TIMEOUT = 120
"""Real seconds one run of the script may take (initdb and a start take a few)."""

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the script runs as root"),
    pytest.mark.skipif(
        not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")),
        reason="no PostgreSQL binaries: the script would install them",
    ),
]


def _shim(folder: Path, name: str, body: str) -> None:
    """A command *name* on *folder*, running *body* (``$real`` is the command it shadows)."""
    real = shutil.which(name)
    assert real is not None
    path = folder / name
    path.write_text(f'#!/bin/sh\nreal="{real}"\n{body}\n')
    path.chmod(0o755)


@pytest.fixture
def shims(tmp_path: Path) -> Iterator[Path]:
    """A PATH folder whose ``mktemp`` notes the directory the script makes, in ``made``.

    Any server still running in a noted directory is stopped at the end, so that a
    failing test does not leave one behind either.
    """
    folder = tmp_path / "bin"
    folder.mkdir()
    _shim(
        folder,
        "mktemp",
        f'made=$("$real" "$@") || exit\necho "$made" >>"{tmp_path}/made"\necho "$made"',
    )
    yield folder
    for made in _made(folder):
        if made.exists():
            subprocess.run(
                ["bash", str(SCRIPT), "stop", str(made)], capture_output=True, check=False
            )


def _made(folder: Path) -> list[Path]:
    noted = folder.parent / "made"
    return [Path(line) for line in noted.read_text().split()] if noted.exists() else []


def _run(folder: Path, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", str(SCRIPT)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=environment,
        text=True,
        timeout=SCRIPT_TIMEOUT,
        check=False,
    )


def _servers_in(directory: Path) -> list[int]:
    """The ids of the processes running with their data in *directory*."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not a process
        if f"{directory}/data".encode() in command:
            found.append(int(entry.name))
    return found


def _assert_nothing_left(folder: Path) -> None:
    (made,) = _made(folder)
    assert _servers_in(made) == []
    assert not made.exists()


def test_a_failed_createdb_stops_the_server_it_started(shims: Path) -> None:
    """The server runs when creating the database fails: the script stops it, removes its
    directory and exits non-zero, saying which step failed and what it stopped."""
    _shim(
        shims,
        "runuser",
        'case "$4" in */createdb) echo refused >&2; exit 3;; esac\nexec "$real" "$@"',
    )
    run = _run(shims)
    assert run.returncode != 0
    assert run.stdout == ""
    assert "postgres.sh: creating the database failed (exit status 3)" in run.stderr
    assert "stopped the server it started" in run.stderr
    _assert_nothing_left(shims)


def test_a_closed_output_stops_the_server_it_started(shims: Path) -> None:
    """A caller gone before the environment is printed (its end of the pipe closed) gets
    no server either: printing it fails, and the server is stopped."""
    read, write = os.pipe()
    os.close(read)
    try:
        run = _run(shims, stdout=write)
    finally:
        os.close(write)
    assert run.returncode != 0
    assert "postgres.sh: printing the environment failed" in run.stderr
    assert "stopped the server it started" in run.stderr
    _assert_nothing_left(shims)


def test_a_started_server_is_left_running_and_named(shims: Path) -> None:
    """Succeeding, the script leaves its server running and prints how to reach it; the
    stop command it names stops it."""
    run = _run(shims)
    assert run.returncode == 0, run.stderr
    dsn_line, dir_line = run.stdout.splitlines()
    (made,) = _made(shims)
    assert dir_line == f"export RETINUE_TEST_POSTGRES_DIR={made}"
    port = int(dsn_line.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass
    assert _servers_in(made) != []
    subprocess.run(["bash", str(SCRIPT), "stop", str(made)], capture_output=True, check=True)
    _assert_nothing_left(shims)


def test_ctrl_c_while_the_cluster_is_made_names_the_step_and_dies_of_it(shims: Path) -> None:
    """Ctrl-C (a SIGINT to the script's process group) while initdb runs: the step is
    named on the caller's stderr, not in the step's own log, the directory is removed,
    and the script dies of the signal, so a calling shell stops as Ctrl-C asks."""
    started = shims.parent / "initdb-started"
    _shim(
        shims,
        "runuser",
        f'case "$4" in */initdb) touch "{started}"; sleep 60;; esac\nexec "$real" "$@"',
    )
    environment = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    with subprocess.Popen(
        ["bash", str(SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        text=True,
        start_new_session=True,
    ) as script:
        _wait_for(started, script)
        os.killpg(script.pid, signal.SIGINT)
        stdout, stderr = script.communicate(timeout=SCRIPT_TIMEOUT)
    assert script.returncode == -signal.SIGINT
    assert stdout == ""
    assert "postgres.sh: creating the cluster failed (exit status 130)" in stderr
    _assert_nothing_left(shims)


def _wait_for(marker: Path, script: subprocess.Popen[str]) -> None:
    """Wait (real time, bounded) until *marker* exists, the script still running."""
    for _ in range(SCRIPT_TIMEOUT * 10):
        if marker.exists():
            return
        assert script.poll() is None, script.communicate()
        select.select([], [], [], 0.1)  # a pause without time.sleep, which the suite bans
    raise AssertionError(f"{marker} never appeared")


def test_an_argument_it_does_not_take_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """A directory given to the script would be ignored (its cluster goes to a new temp dir):
    refused with its usage, exit status 2, nothing made."""
    folder = tmp_path / "data"
    run = subprocess.run(
        ["bash", str(SCRIPT), str(folder)],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
        check=False,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert "usage: postgres.sh" in run.stderr
    assert not folder.exists()
