"""A group of new JSONL sessions' first writes needs about one open file per session, as
README.md promises ("one open file per live session"), not one per session and one per cwd.

The load scenarios run in a child (``_first_writes_child``), as ``RLIMIT_NOFILE``
is process-wide: 200 new sessions flushed in one group under a 256-file limit.
The others watch one group's descriptors in process.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from retinue.stores import JSONLStore, _jsonl
from retinue.stores._backend import AppendBatch
from retinue.stores._jsonl import JSONLBackend
from retinue.testing import check_session_invariants
from tests.stores._jsonl_files_kit import descriptors_filled, session_of
from tests.stores._open_files_child import digest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 256
SESSIONS = 200
CHILD_DEADLINE = 100
"""Real seconds a child may run (it takes 1-5 s): inside the store tests' own bound."""


async def _first_writes(root: Path, *, claimed: bool, cwds: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.stores._first_writes_child", str(root)]
    flags = [str(LIMIT), str(SESSIONS), str(int(claimed)), str(int(cwds))]
    with trio.fail_after(CHILD_DEADLINE):
        result = await trio.run_process(
            [*command, *flags], cwd=ROOT, capture_stdout=True, capture_stderr=True, check=False
        )
    assert result.returncode == 0, result.stderr.decode()
    summary: dict[str, Any] = json.loads(result.stdout)
    return summary


async def _assert_all_stored(root: Path, summary: dict[str, Any]) -> None:
    """No first write failed, all went in one group, and every session loads back whole."""
    assert summary["errors"] == {}
    assert summary["largest_group"] == SESSIONS
    async with JSONLStore(root) as store:
        assert len(await store.list()) == SESSIONS
        for session_id, expected in summary["digests"].items():
            session = await store.inspect(session_id)
            check_session_invariants(session.events)
            assert digest(session) == expected, session_id
    assert _leftovers(root) == []


def _leftovers(root: Path) -> list[Path]:
    """The temporaries and creation markers under *root*."""
    return [
        path
        for pattern in ("*.tmp", "*.creating")
        for path in root.rglob(pattern)
        if path.is_file()
    ]


@pytest.mark.parametrize("cwds", [False, True], ids=["one-cwd", "a-cwd-each"])
async def test_jsonl_claimed_sessions_first_written_together_need_one_file_each(
    tmp_path: Path, cwds: bool
) -> None:
    """README ("one open file per live session"), R11.3, R11.5: 200 sessions claimed at
    their creation (as the runtime's agents are) and first written in one group under a
    256-file limit are all stored: a first write adds no descriptor to its claim's."""
    root = tmp_path / "sessions"
    await _assert_all_stored(root, await _first_writes(root, claimed=True, cwds=cwds))


async def test_jsonl_new_sessions_at_as_many_cwds_first_written_together_need_one_file_each(
    tmp_path: Path,
) -> None:
    """README ("one open file per live session"), R11.4, R11.12: 200 new sessions, each at a
    cwd (so a bucket) of its own, first written in one group under a 256-file limit are all
    stored: the buckets are synced one open at a time, not held open across the group."""
    root = tmp_path / "sessions"
    await _assert_all_stored(root, await _first_writes(root, claimed=False, cwds=True))


def _open_directories(root: Path) -> list[Path]:
    """The directories at or under *root* this process holds open."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # the listing's own descriptor, closed since
        if target.is_relative_to(root) and target.is_dir():
            held.append(target)
    return held


@pytest.mark.parametrize("buckets", [3, _jsonl.SYNCFS_THRESHOLD + 2], ids=["fdatasync", "syncfs"])
def test_jsonl_a_group_syncs_its_buckets_each_open_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, buckets: int
) -> None:
    """README ("one open file per live session"), R11.4: the buckets of a group's new files
    are made durable one open at a time, whatever their number (with syncfs, once per
    file system); none is held open across the group."""
    syncs: list[list[Path]] = []
    real_fdatasync, real_syncfs = os.fdatasync, _jsonl._syncfs

    def fdatasync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            syncs.append(_open_directories(tmp_path))
        real_fdatasync(fd)

    def syncfs(fd: int) -> int:
        assert real_syncfs is not None
        syncs.append(_open_directories(tmp_path))
        return int(real_syncfs(fd))

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    if real_syncfs is not None:
        monkeypatch.setattr(_jsonl, "_syncfs", syncfs)
    sessions = [session_of(f"s{index}", 1, cwd=f"/srv/{index}") for index in range(buckets)]
    backend = JSONLBackend(tmp_path)
    backend.open()
    try:
        batches = [AppendBatch(s.id, 0, tuple(s.events), header=s.header) for s in sessions]
        assert backend.write(batches) == [None] * buckets
    finally:
        backend.close()
    whole = real_syncfs is not None and buckets >= _jsonl.SYNCFS_THRESHOLD
    directory_syncs = syncs[1:] if whole else syncs  # (a syncfs syncs the files first)
    assert [len(held) for held in directory_syncs] == [1] * (1 if whole else buckets)


def test_jsonl_a_group_keeps_a_descriptor_for_its_buckets_if_the_table_fills_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.4, R11.5: a group with new files holds one descriptor in reserve for syncing their
    buckets, so other opens filling the table while its files sync (another thread's) leave
    it one: the group commits."""
    backend = JSONLBackend(tmp_path)
    backend.open()
    real_sync = backend._sync
    filled = contextlib.ExitStack()

    def sync(fds: list[int]) -> None:
        real_sync(fds)
        filled.enter_context(descriptors_filled())

    monkeypatch.setattr(backend, "_sync", sync)
    sessions = [session_of(f"s{index}", 1, cwd=f"/srv/{index}") for index in range(3)]
    try:
        with filled:
            batches = [AppendBatch(s.id, 0, tuple(s.events), header=s.header) for s in sessions]
            assert backend.write(batches) == [None] * 3
    finally:
        backend.close()
    for session in sessions:
        assert JSONLBackend(tmp_path).read(session.id) is not None
