"""The JSONL store after a failed group: nothing is appended after bytes it could not cut off,
and a group is synced on every file system it wrote to."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore, _jsonl, _jsonlfiles
from retinue.stores._ids import bucket_name
from retinue.testing import check_session_invariants
from tests.stores._kit import flush_together, lines, run_turn


class _Faults:
    """Switches for the file operations a test makes fail."""

    def __init__(self) -> None:
        self.sync = 0
        """How many more syncs fail (EINVAL: not a failure of the whole store)."""
        self.truncate = 0
        """How many more ftruncate calls fail with EIO."""
        self.half_write = False
        """Whether appends write half their bytes, then fail with ENOSPC."""


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> _Faults:
    faults = _Faults()
    real_sync = _jsonl.JSONLBackend._sync
    real_truncate = os.ftruncate
    real_write_all = _jsonlfiles.write_all

    def sync(self: _jsonl.JSONLBackend, fds: list[int]) -> None:
        if faults.sync:
            faults.sync -= 1
            raise OSError(errno.EINVAL, "Invalid argument")
        real_sync(self, fds)

    def ftruncate(fd: int, length: int) -> None:
        if faults.truncate:
            faults.truncate -= 1
            raise OSError(errno.EIO, "Input/output error")
        real_truncate(fd, length)

    def write_all(fd: int, data: bytes) -> None:
        if not faults.half_write:
            real_write_all(fd, data)
            return
        real_write_all(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_jsonl.JSONLBackend, "_sync", sync)
    monkeypatch.setattr(os, "ftruncate", ftruncate)
    monkeypatch.setattr(_jsonl, "write_all", write_all)
    return faults


def _only_file(root: Path) -> Path:
    [path] = root.glob("*/*.jsonl")
    return path


async def _load(root: Path, session_id: str) -> Session:
    async with JSONLStore(root) as store:
        loaded = await store.load(session_id)
    check_session_invariants(loaded.events)
    return loaded


async def test_jsonl_a_group_retried_after_a_failed_cut_back_is_written_once(
    tmp_path: Path, faults: _Faults
) -> None:
    """R11.4, R11.5: a failed group whose files could not be cut back is retried batch by
    batch; each file is cut back first, so no acknowledged batch follows a copy of itself.
    """
    sessions = [Session.create(f"s{index}", cwd="/srv") for index in range(2)]
    async with JSONLStore(tmp_path) as store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session, "one")
        assert await flush_together(store, sessions) == {}
        for session in sessions:
            run_turn(session, "two")
        faults.sync, faults.truncate = 1, 2
        assert await flush_together(store, sessions) == {}
        for session in sessions:
            await store.detach(session)
    for session in sessions:
        assert lines((await _load(tmp_path, session.id)).events) == lines(session.events)


async def test_jsonl_a_file_that_cannot_be_cut_back_takes_no_more_appends(
    tmp_path: Path, faults: _Faults
) -> None:
    """R11.4, R11.8: half a batch that cannot be cut off stays the file's tail: later flushes
    fail naming the session and append nothing after it, and a load repairs it as a crash's
    tail (the whole lines of the batch kept, its torn last line dropped). A read beside
    leaves that line out unreported: to it, it may be a write still under way.
    """
    session = Session.create("s1", cwd="/srv")
    store = JSONLStore(tmp_path)
    store.attach_new(session)
    run_turn(session, "one")
    await store.flush(session)
    acknowledged = lines(session.events)
    run_turn(session, "two")
    faults.half_write, faults.truncate = True, 1_000
    with pytest.raises(StoreError):
        await store.flush(session)
    path = _only_file(tmp_path)
    left = path.read_bytes()
    faults.half_write = False
    with pytest.raises(StoreError) as caught:
        await store.flush(session)
    assert caught.value.code == "STORAGE_ERROR"
    assert "session 's1'" in caught.value.message
    assert "cutting them off failed" in caught.value.message
    with pytest.raises(StoreError) as closed:
        await store.aclose()
    assert closed.value.code == "CLOSE_FAILED"
    assert path.read_bytes() == left
    faults.truncate = 0
    async with JSONLStore(tmp_path) as fresh:
        recovered = await fresh.inspect_recovered("s1")
        loaded = await fresh.load("s1")
    check_session_invariants(loaded.events)
    assert recovered.dropped == 0
    assert len(acknowledged) <= recovered.kept < len(session.events)
    assert not left.endswith(b"\n")
    assert path.read_bytes().count(b"\n") == len(loaded.events) + 1  # the half line cut off
    assert path.read_bytes().endswith(b"\n")
    assert lines(loaded.events[: recovered.kept]) == lines(session.events[: recovered.kept])


@pytest.fixture
def other_file_system(tmp_path: Path) -> Iterator[Path]:
    """A folder on a file system other than tmp_path's (tmpfs /dev/shm), or skip."""
    if _jsonl._syncfs is None:
        pytest.skip("this libc has no syncfs")
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system at /dev/shm")
    with tempfile.TemporaryDirectory(dir=shm) as folder:
        yield Path(folder)


async def _store_sessions(root: Path, cwd: str, session_ids: list[str]) -> None:
    async with JSONLStore(root) as store:
        for session_id in session_ids:
            session = Session.create(session_id, cwd=cwd)
            store.attach_new(session)
            run_turn(session)
            await store.detach(session)


async def test_jsonl_a_group_on_two_file_systems_syncs_both(
    tmp_path: Path, other_file_system: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.4: a group large enough for syncfs whose files lie on two file systems (a bucket
    linked to another) syncs each file system before it is acknowledged.
    """
    root = tmp_path / "sessions"
    count = _jsonl.SYNCFS_THRESHOLD // 2
    here = [f"here{index}" for index in range(count)]
    there = [f"there{index}" for index in range(count)]
    await _store_sessions(root, "/here", here)
    await _store_sessions(other_file_system, "/there", there)
    (root / bucket_name("/there")).symlink_to(other_file_system / bucket_name("/there"))
    synced: set[int] = set()
    real_syncfs = _jsonl._syncfs
    assert real_syncfs is not None

    def syncfs(fd: int) -> int:
        synced.add(os.fstat(fd).st_dev)
        return int(real_syncfs(fd))

    monkeypatch.setattr(_jsonl, "_syncfs", syncfs)
    async with JSONLStore(root) as store:
        sessions = [await store.load(session_id) for session_id in [*there, *here]]
        for session in sessions:
            store.attach(session)
            run_turn(session)
        assert await flush_together(store, sessions) == {}
        for session in sessions:
            await store.detach(session)
    assert synced == {os.stat(root).st_dev, os.stat(other_file_system).st_dev}
