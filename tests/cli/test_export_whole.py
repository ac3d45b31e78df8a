"""``sessions export --output`` writes its file whole or leaves it as it was."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.session import Session
from retinue.stores import JSONLStore
from tests.stores._kit import run_turn

DEADLINE = 60.0

FILE_SIZE_LIMIT = 64 * 1024
"""Bytes the exporting process may write to one file: less than the export holds."""

EXPORT = [sys.executable, "-m", "retinue.cli", "sessions", "export", "s1", "--store", "jsonl:store"]

EARLIER_EXPORT = '{"type":"session","id":"s1","created_at":0,"version":0}\n'


async def _store(directory: Path) -> Session:
    session = Session.create("s1")
    async with JSONLStore(directory) as store:
        store.attach_new(session)
        for turn in range(100):
            run_turn(session, f"what is the weather on day {turn}?")
        await store.flush(session)
    return session


@pytest.fixture
def session(tmp_path: Path) -> Session:
    """A session of 100 turns, stored in the JSONL store ``store``."""
    return trio.run(_store, tmp_path / "store")


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


@pytest.mark.skipif(sys.platform == "win32", reason="no file size limit to set")
def test_an_export_cut_off_part_way_leaves_the_earlier_file_as_it_was(
    session: Session, tmp_path: Path
) -> None:
    """The export outgrows the file size limit: status 1 and one line naming the
    failure, the earlier export still whole and nothing left beside it. Written in
    place, the file was left holding the first 64 KiB, cut off mid-line."""
    assert len(to_jsonl(session).encode()) > FILE_SIZE_LIMIT
    output = tmp_path / "out" / "s1.jsonl"
    output.parent.mkdir()
    output.write_text(EARLIER_EXPORT, encoding="utf-8")
    done = subprocess.run(
        [*EXPORT, "-o", str(output)],
        capture_output=True,
        cwd=tmp_path,
        preexec_fn=_limit_file_size,
        timeout=DEADLINE,
        check=False,
    )
    assert (done.returncode, done.stderr.decode()) == (
        1,
        f"retinue sessions export: [Errno {errno.EFBIG}] {os.strerror(errno.EFBIG)}\n",
    )
    assert output.read_text(encoding="utf-8") == EARLIER_EXPORT
    assert os.listdir(output.parent) == ["s1.jsonl"]


def test_an_export_replaces_the_file_a_link_names_and_keeps_its_mode(
    session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a symbolic link, the file it names takes the export, the link stays a
    link, and the replaced file's permissions are the new one's."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "s1.jsonl"
    target.write_text(EARLIER_EXPORT, encoding="utf-8")
    target.chmod(0o640)
    (tmp_path / "link.jsonl").symlink_to(target)
    assert main(["sessions", "export", "s1", "--store", "jsonl:store", "-o", "link.jsonl"]) == 0
    assert (tmp_path / "link.jsonl").is_symlink()
    assert target.read_text(encoding="utf-8") == to_jsonl(session)
    assert target.stat().st_mode & 0o777 == 0o640
