"""The JSONL store after a creation that failed once its file was linked into place.

The file steps fail by fault injection on a real file system: the link into
place works, then removing the temporary or the marker, or syncing the folder,
fails, and the undo's removal of the linked file may fail too. Nothing was
acknowledged, so the flush's retry must create the session, exactly once.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore, _jsonl
from retinue.testing import check_session_invariants
from tests.stores._kit import flush_together, lines, run_turn


class _Window:
    """Faults armed once a session file is linked into place, each failing with EIO."""

    def __init__(self) -> None:
        self.linked = False
        self.unlinks: dict[str, int] = {}
        """How many more removals of names with each suffix fail."""
        self.directory_syncs = 0
        """How many more syncs of a folder (fdatasync or syncfs) fail."""

    def spent(self) -> bool:
        """Whether every armed fault has fired."""
        return not self.directory_syncs and not any(self.unlinks.values())

    def fails_unlink(self, path: str) -> bool:
        for suffix, count in self.unlinks.items():
            if self.linked and count and path.endswith(suffix):
                self.unlinks[suffix] -= 1
                return True
        return False

    def fails_sync(self, fd: int) -> bool:
        if self.linked and self.directory_syncs and stat.S_ISDIR(os.fstat(fd).st_mode):
            self.directory_syncs -= 1
            return True
        return False


def _io_error(what: str) -> OSError:
    return OSError(errno.EIO, f"Input/output error ({what})")


@pytest.fixture
def window(monkeypatch: pytest.MonkeyPatch) -> _Window:
    window = _Window()
    real_link, real_unlink, real_fdatasync = os.link, os.unlink, os.fdatasync
    real_syncfs = _jsonl._syncfs

    def link(source: str | Path, target: str | Path, **kwargs: object) -> None:
        real_link(source, target, **kwargs)  # type: ignore[arg-type]
        window.linked |= str(target).endswith(".jsonl")

    def unlink(path: str | Path, **kwargs: object) -> None:
        if window.fails_unlink(str(path)):
            raise _io_error("unlink")
        real_unlink(path, **kwargs)  # type: ignore[arg-type]

    def fdatasync(fd: int) -> None:
        if window.fails_sync(fd):
            raise _io_error("fdatasync")
        real_fdatasync(fd)

    def syncfs(fd: int) -> int:
        assert real_syncfs is not None
        if window.fails_sync(fd):
            raise _io_error("syncfs")
        return int(real_syncfs(fd))

    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    if real_syncfs is not None:
        monkeypatch.setattr(_jsonl, "_syncfs", syncfs)
    return window


def _files(root: Path) -> list[str]:
    """Every file under *root*, temporaries and creation markers included."""
    return sorted(path.name for path in root.rglob("*") if path.is_file())


async def _stored_lines(root: Path, session_id: str) -> list[str]:
    async with JSONLStore(root) as store:
        loaded = await store.load(session_id)
    check_session_invariants(loaded.events)
    return lines(loaded.events)


@pytest.mark.parametrize(
    ("unlinks", "directory_syncs"),
    [
        pytest.param({".tmp": 1}, 0, id="removing-the-temporary-fails"),
        pytest.param({".creating": 1}, 0, id="removing-the-marker-fails"),
        pytest.param({".jsonl": 1}, 1, id="folder-sync-and-undo-fail"),
    ],
)
async def test_jsonl_a_creation_failed_after_its_link_is_retried_once(
    tmp_path: Path, window: _Window, unlinks: dict[str, int], directory_syncs: int
) -> None:
    """R11.3, R11.5: a new session's flush that fails after its file was linked in leaves the
    id usable: the retry (the same header and batch, and what was appended since) creates
    the session, and a reload holds each event once.
    """
    session = Session.create("s1", cwd="/srv")
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        run_turn(session, "one")
        window.unlinks, window.directory_syncs = unlinks, directory_syncs
        with pytest.raises(StoreError) as failed:
            await store.flush(session)
        assert failed.value.code == "STORAGE_ERROR"
        assert window.spent()
        run_turn(session, "two")
        await store.flush(session)
        await store.detach(session)
    assert _files(tmp_path) == ["s1.jsonl"]
    assert await _stored_lines(tmp_path, "s1") == lines(session.events)


async def test_jsonl_a_group_of_creations_whose_syncfs_and_undo_failed_is_retried_once(
    tmp_path: Path, window: _Window
) -> None:
    """R11.3, R11.4: a group large enough for syncfs that fails syncing its folders after
    linking its files, none of which can be removed again, commits on the retry.
    """
    if _jsonl._syncfs is None:
        pytest.skip("this libc has no syncfs")
    count = _jsonl.SYNCFS_THRESHOLD
    sessions = [Session.create(f"s{index}", cwd=f"/srv/{index}") for index in range(count)]
    async with JSONLStore(tmp_path) as store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        window.unlinks, window.directory_syncs = {".jsonl": count}, 1
        failed = await flush_together(store, sessions)
        assert sorted(failed) == sorted(session.id for session in sessions)
        assert window.spent()
        assert await flush_together(store, sessions) == {}
        for session in sessions:
            await store.detach(session)
    for session in sessions:
        assert await _stored_lines(tmp_path, session.id) == lines(session.events)


async def test_jsonl_a_file_a_failed_creation_left_is_no_stored_session(
    tmp_path: Path, window: _Window
) -> None:
    """R11.3, R11.5: while a failed creation's file cannot be removed, no other store loads
    or creates that id, and the retry fails as a storage error, not as an existing id;
    once the file can be removed, the retry creates the session.
    """
    session = Session.create("s1", cwd="/srv")
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        run_turn(session)
        window.unlinks, window.directory_syncs = {".jsonl": 2}, 1
        with pytest.raises(StoreError):
            await store.flush(session)
        async with JSONLStore(tmp_path) as other:
            with pytest.raises(StoreError) as loading:
                await other.load("s1")
            assert loading.value.code == "SESSION_LOCKED"
        rival = Session.create("s1", cwd="/elsewhere")
        run_turn(rival)
        other = JSONLStore(tmp_path)
        other.attach_new(rival)
        with pytest.raises(StoreError) as creating:
            await other.flush(rival)
        assert creating.value.code == "SESSION_ALREADY_EXISTS"
        with pytest.raises(StoreError, match="already exists"):
            await other.aclose()  # its drain is refused the same way
        with pytest.raises(StoreError) as retried:
            await store.flush(session)
        assert retried.value.code == "STORAGE_ERROR"
        assert "session 's1'" in retried.value.message
        assert "no flush acknowledged" in retried.value.message
        assert window.spent()
        await store.detach(session)
    assert await _stored_lines(tmp_path, "s1") == lines(session.events)


async def test_jsonl_closing_removes_a_file_a_failed_creation_left(
    tmp_path: Path, window: _Window
) -> None:
    """R11.3, R11.6: a store closed before a failed creation could be retried removes the
    file it left, so nothing no flush acknowledged is a stored session afterwards.
    """
    session = Session.create("s1", cwd="/srv")
    store = JSONLStore(tmp_path)
    store.attach_new(session)
    run_turn(session)
    window.unlinks, window.directory_syncs = {".jsonl": 2}, 1
    with pytest.raises(StoreError):
        await store.flush(session)
    with pytest.raises(StoreError) as closing:
        await store.aclose()  # its drain retries the creation, and fails again
    assert closing.value.code == "CLOSE_FAILED"
    assert _files(tmp_path) == []
    async with JSONLStore(tmp_path) as fresh:
        assert not await fresh.exists("s1")
        fresh.attach_new(session)
        await fresh.detach(session)
    assert await _stored_lines(tmp_path, "s1") == lines(session.events)
