"""The JSONL store while it holds the file a failed first flush linked in and could not remove.

Faults are injected on a real file system once the session file is linked into
place: syncing its folder fails, and so does removing the file again. No flush
acknowledged that file, so to the store holding it the session is not stored;
a store opened after its holder is gone (as after a crash) loads it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.stores._backend import AppendBatch
from retinue.stores._jsonl import JSONLBackend, session_path
from retinue.testing import check_session_invariants
from tests.stores._kit import lines, run_turn


class _Faults:
    """Failures armed once a session file is linked into place, each an EIO."""

    def __init__(self) -> None:
        self.linked = False
        self.unlinks = 0
        """How many more removals of a session file fail."""
        self.directory_syncs = 0
        """How many more syncs of a folder fail."""

    def arm(self, *, unlinks: int) -> None:
        self.unlinks, self.directory_syncs = unlinks, 1

    def spent(self) -> bool:
        return not self.unlinks and not self.directory_syncs


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> _Faults:
    faults = _Faults()
    real_link, real_unlink, real_fdatasync = os.link, os.unlink, os.fdatasync

    def link(source: str | Path, target: str | Path, **kwargs: object) -> None:
        real_link(source, target, **kwargs)  # type: ignore[arg-type]
        faults.linked |= str(target).endswith(".jsonl")

    def unlink(path: str | Path, **kwargs: object) -> None:
        if faults.linked and faults.unlinks and str(path).endswith(".jsonl"):
            faults.unlinks -= 1
            raise OSError(errno.EIO, "Input/output error (unlink)")
        real_unlink(path, **kwargs)  # type: ignore[arg-type]

    def fdatasync(fd: int) -> None:
        # One session's group syncs its folder with fdatasync, never syncfs.
        if faults.linked and faults.directory_syncs and stat.S_ISDIR(os.fstat(fd).st_mode):
            faults.directory_syncs -= 1
            raise OSError(errno.EIO, "Input/output error (fdatasync)")
        real_fdatasync(fd)

    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    return faults


async def _fail_first_flush(store: JSONLStore, session: Session, faults: _Faults) -> None:
    """Attach *session* as new and fail its first flush after its file was linked in."""
    store.attach_new(session)
    run_turn(session)
    with pytest.raises(StoreError) as failed:
        await store.flush(session)
    assert failed.value.code == "STORAGE_ERROR"
    assert faults.spent()


async def _ids(store: JSONLStore) -> list[str]:
    return sorted(header.id for header in await store.list())


async def test_jsonl_a_held_leftover_is_no_stored_session_to_its_store(
    tmp_path: Path, faults: _Faults
) -> None:
    """R11.3, R11.4, R11.14: while the store holds the file of a first flush that failed, the
    session is not stored to it: ``exists`` is false, ``list`` leaves it out, ``inspect``
    finds no such session, as for a new session never flushed. Once the retry commits,
    each of them sees the session.
    """
    kept, session = Session.create("kept", cwd="/srv"), Session.create("s1", cwd="/srv")
    async with JSONLStore(tmp_path) as store:
        store.attach_new(kept)
        run_turn(kept)
        await store.detach(kept)
        faults.arm(unlinks=1)
        await _fail_first_flush(store, session, faults)
        assert session_path(tmp_path, session.header).exists()

        assert not await store.exists("s1")
        assert await _ids(store) == ["kept"]
        with pytest.raises(StoreError) as inspecting:
            await store.inspect("s1")
        assert inspecting.value.code == "SESSION_NOT_FOUND"
        with pytest.raises(StoreError) as loading:
            await store.load("s1")
        assert loading.value.code == "SESSION_TRACKED"  # still attached, its events buffered

        await store.flush(session)
        assert await store.exists("s1")
        assert await _ids(store) == ["kept", "s1"]
        assert lines((await store.inspect("s1")).events) == lines(session.events)
        await store.detach(session)


def test_jsonl_backend_claims_no_held_leftover(tmp_path: Path, faults: _Faults) -> None:
    """R11.3: the backend refuses to claim the file it holds for a failed creation as a
    session that is not stored, not as one another writer has.
    """
    session = Session.create("s1", cwd="/srv")
    run_turn(session)
    backend = JSONLBackend(tmp_path)
    backend.open()
    try:
        faults.arm(unlinks=1)
        with pytest.raises(OSError, match="fdatasync"):
            backend.write([AppendBatch("s1", 0, tuple(session.events), header=session.header)])
        assert session_path(tmp_path, session.header).exists()
        with pytest.raises(StoreError) as claiming:
            backend.claim("s1")
        assert claiming.value.code == "SESSION_NOT_FOUND"
    finally:
        backend.close()
    assert not session_path(tmp_path, session.header).exists()


async def test_jsonl_a_leftover_nobody_holds_loads_as_a_crashed_write(
    tmp_path: Path, faults: _Faults
) -> None:
    """R11.8: a file a failed creation left once its holder is gone (closing could not remove
    it either, as after a crash just past the link) is a stored session to the next store.
    """
    session = Session.create("s1", cwd="/srv")
    store = JSONLStore(tmp_path)
    faults.arm(unlinks=1)
    await _fail_first_flush(store, session, faults)
    faults.unlinks = 2  # the removals of the drain's retry and of the close
    with pytest.raises(StoreError) as closing:
        await store.aclose()
    assert closing.value.code == "CLOSE_FAILED"
    assert faults.spent()
    async with JSONLStore(tmp_path) as fresh:
        assert await fresh.exists("s1")
        assert await _ids(fresh) == ["s1"]
        loaded = await fresh.load("s1")
    check_session_invariants(loaded.events)
    assert lines(loaded.events) == lines(session.events)
