"""A claimed JSONL id's first write fills the claim's own locked file and links it in, so the
claim's one descriptor is the session's (README: "one open file per live session"), while every
guarantee of a first write holds: atomic (R11.3), one writer per id (R11.11, R12.2), a failed
group undone with the claim kept for its retry (R11.5), leftovers swept by their free lock."""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.stores._backend import AppendBatch
from retinue.stores._ids import bucket_name
from retinue.stores._jsonl import JSONLBackend
from retinue.stores._jsonlclaims import NewClaims
from retinue.stores._jsonlfiles import MARKERS_DIRECTORY, link_temporary, remove_leftovers
from tests.stores._jsonl_files_kit import descriptors_filled, session_of
from tests.stores._kit import REAL_DEADLINE, attach_undrained, lines, refusal, run_turn

DUPLICATE = ("StoreError", "SESSION_ALREADY_EXISTS")


def _open_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _new_batch(session: Session) -> AppendBatch:
    return AppendBatch(session.id, 0, tuple(session.events), header=session.header)


def _bytes_under(root: Path) -> int:
    """How many bytes the files under *root* hold."""
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def _files(root: Path) -> list[str]:
    """Every file under *root*, temporaries and creation markers included."""
    return sorted(path.name for path in root.rglob("*") if path.is_file())


def test_jsonl_a_claimed_first_write_opens_no_file_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README ("one open file per live session"): while a group first writes 20 claimed
    sessions, and after it, the process holds as many descriptors as their claims: each
    claim's is its session's."""
    backend = JSONLBackend(tmp_path)
    backend.open()
    sessions = [session_of(f"s{index}", 1) for index in range(20)]
    for session in sessions:
        backend.claim_new(session.id)
    claimed = _open_count()
    during: list[int] = []
    real_sync = backend._sync

    def sync(fds: list[int]) -> None:
        during.append(_open_count())
        real_sync(fds)

    monkeypatch.setattr(backend, "_sync", sync)
    try:
        assert backend.write([_new_batch(session) for session in sessions]) == [None] * 20
        assert during == [claimed]
        assert _open_count() == claimed
    finally:
        backend.close()
    assert _files(tmp_path) == sorted(f"{session.id}.jsonl" for session in sessions)


def test_jsonl_claimed_sessions_first_written_with_one_descriptor_left_are_stored(
    tmp_path: Path,
) -> None:
    """README ("one open file per live session"), R11.5: with the table full of claims but
    for one slot (as when an agent's creation was refused for want of more), a group of their
    first writes commits: it opens one descriptor at a time, for a lookup or a sync."""
    backend = JSONLBackend(tmp_path)
    backend.open()
    sessions = [session_of(f"s{index}", 1) for index in range(5)]
    try:
        for session in sessions:
            backend.claim_new(session.id)
        with descriptors_filled(spare=1):
            assert backend.write([_new_batch(session) for session in sessions]) == [None] * 5
    finally:
        backend.close()
    assert _files(tmp_path) == sorted(f"{session.id}.jsonl" for session in sessions)


async def test_jsonl_a_claimed_first_write_retried_after_a_failed_sync_stores_only_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3, R11.5: a claimed session's first write whose group failed to sync is emptied out
    of the claim's file; the claim is kept, and the retry stores its header and events once,
    not after the failed attempt's."""
    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(tmp_path) as first, JSONLStore(tmp_path) as second:
            session = await _failed_first_write(
                first, monkeypatch, (JSONLBackend, "_sync", _failing_sync)
            )
            # A failed group's bytes hold no disk space until the retry: on a full disk they
            # would keep every other session's append failing.
            assert _bytes_under(tmp_path) == 0
            assert await refusal(lambda: second.claim_new("s")) == DUPLICATE
            await _retry_stores_it(first, second, session)
    assert _files(tmp_path) == ["s.jsonl"]


def _failing_sync(backend: JSONLBackend, fds: list[int]) -> None:
    raise OSError(errno.EIO, "Input/output error")


async def _failed_first_write(
    store: JSONLStore, monkeypatch: pytest.MonkeyPatch, *patches: tuple[object, str, object]
) -> Session:
    """Claim ``s`` in *store* and attach it; its first write fails with *patches* set."""
    await store.claim_new("s")
    session = attach_undrained(store, "s")
    with monkeypatch.context() as patch:
        for target, name, value in patches:
            patch.setattr(target, name, value)
        with pytest.raises(StoreError):
            await store.flush(session)
    return session


async def _retry_stores_it(first: JSONLStore, second: JSONLStore, session: Session) -> None:
    """Another turn, then the retried flush stores the whole session, which *second* loads."""
    run_turn(session, "again")
    await first.flush(session)
    assert await refusal(lambda: second.claim_new("s")) == DUPLICATE
    await first.detach(session)
    assert lines((await second.load("s")).events) == lines(session.events)


async def test_jsonl_a_claimed_file_a_failed_group_could_not_take_out_keeps_the_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5, R12.2: a claimed session's file linked in by a group that then failed, and that
    could not be removed again, holds the id's marker with it: another store's claim is still
    refused, and the retry takes the file out, the claim back, and stores the session."""
    real_unlink = os.unlink
    failed_unlinks: list[str] = []

    def unlink(path: str | Path, **kwargs: object) -> None:
        if str(path).endswith(".jsonl") and not failed_unlinks:
            failed_unlinks.append(str(path))
            raise OSError(errno.EIO, "Input/output error")
        real_unlink(path, **kwargs)  # type: ignore[arg-type]

    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(tmp_path) as first, JSONLStore(tmp_path) as second:
            session = await _failed_first_write(
                first,
                monkeypatch,
                (JSONLBackend, "_sync_directories", _failing_sync),
                (os, "unlink", unlink),
            )
            assert len(failed_unlinks) == 1
            assert await refusal(lambda: second.claim_new("s")) == DUPLICATE
            await _retry_stores_it(first, second, session)
    assert _files(tmp_path) == ["s.jsonl"]


def test_jsonl_an_id_released_after_its_file_could_not_be_taken_out_is_claimed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.2: a claimed first write whose group failed and whose linked-in file could not be
    removed keeps the file held; a later claim of the id by the same writer takes that file
    out and claims it, where it was refused as stored by another writer."""
    backend = JSONLBackend(tmp_path)
    backend.open()
    session = session_of("s", 1)
    backend.claim_new("s")
    real_unlink = os.unlink

    def unlink(path: str | Path, **kwargs: object) -> None:
        if str(path).endswith("s.jsonl"):
            raise OSError(errno.EIO, "Input/output error")
        real_unlink(path, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(JSONLBackend, "_sync_directories", _failing_sync)
        patch.setattr(os, "unlink", unlink)
        with pytest.raises(OSError, match="Input/output error"):
            backend.write([_new_batch(session)])
    backend.release("s")
    backend.claim_new("s")
    assert backend.write([_new_batch(session)]) == [None]
    backend.close()
    assert _files(tmp_path) == ["s.jsonl"]


@pytest.fixture
def other_file_system(tmp_path: Path) -> Iterator[Path]:
    """A folder on a file system other than tmp_path's (tmpfs /dev/shm), or skip."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system at /dev/shm")
    with tempfile.TemporaryDirectory(dir=shm) as folder:
        yield Path(folder)


def _bucket_elsewhere(tmp_path: Path, other_file_system: Path) -> tuple[Path, Session]:
    """A store root whose ``/there`` bucket links to a folder on *other_file_system*, and a
    session at ``/there`` holding a turn."""
    root = tmp_path / "sessions"
    root.mkdir()
    (root / bucket_name("/there")).symlink_to(other_file_system)
    session = Session.create("s", cwd="/there")
    run_turn(session)
    return root, session


async def test_jsonl_a_claimed_session_whose_bucket_lies_on_another_file_system_is_created(
    tmp_path: Path, other_file_system: Path
) -> None:
    """R11.3, R11.12: no link reaches a bucket on another file system (mounted, or a link to a
    folder there) from the claim's marker: the first write takes a temporary of its own there."""
    root, session = _bucket_elsewhere(tmp_path, other_file_system)
    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(root) as store:
            await store.claim_new("s")
            store.attach_new(session)
            await store.flush(session)
            await store.detach(session)
            assert lines((await store.load("s")).events) == lines(session.events)
    assert _files(other_file_system) == ["s.jsonl"]


def test_a_claim_settled_leaves_its_file_open_and_locked_without_its_marker(
    tmp_path: Path,
) -> None:
    """R11.11: once its file is linked in, a claim gives its marker up and its descriptor to
    the session: the file stays locked against every other writer."""
    claims = NewClaims(tmp_path)
    claims.take("s")
    marker, fd = claims.file_of("s")
    session_file = tmp_path / "s.jsonl"
    os.link(marker, session_file)
    claims.settle("s")
    try:
        assert "s" not in claims
        assert not marker.exists()
        with open(session_file) as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_a_claim_handed_over_keeps_the_id_until_restored_and_dropped(tmp_path: Path) -> None:
    """R11.11: a claim handed over (to a file a failed group left) still keeps another
    writer's creation of the id out; restored, it is the claim again, and dropped, it is gone."""
    claims, others = NewClaims(tmp_path), NewClaims(tmp_path)
    claims.take("s")
    held = claims.hand_over("s")
    assert "s" not in claims
    with pytest.raises(StoreError) as refused:
        others.take("s")
    assert refused.value.code == "SESSION_LOCKED"
    claims.restore("s", held)
    claims.drop("s")
    assert not held[0].exists()
    assert others.take("s")
    others.drop("s")


def test_jsonl_a_held_file_linked_as_a_temporary_is_swept_only_once_its_lock_is_free(
    tmp_path: Path,
) -> None:
    """R11.3: a claim's file linked beside a session's path bears a temporary's name, so the
    leftover sweep keeps it while its writer lives and removes it after (a crash's)."""
    claims = NewClaims(tmp_path)
    claims.take("s")
    marker, fd = claims.file_of("s")
    bucket = tmp_path / "_no-cwd"
    bucket.mkdir()
    temporary = link_temporary(marker, bucket / "s.jsonl")
    assert temporary.parent == bucket
    assert temporary.name.startswith(".s.jsonl.")
    assert temporary.name.endswith(".tmp")
    remove_leftovers(tmp_path)
    assert temporary.exists()
    assert marker.exists()
    os.close(fd)  # as a crash would
    remove_leftovers(tmp_path)
    assert not temporary.exists()
    assert not marker.exists()


async def test_jsonl_an_unclaimed_session_whose_bucket_lies_on_another_file_system_is_created(
    tmp_path: Path, other_file_system: Path
) -> None:
    """R11.3, R11.12: a first write with no claim (an import: ``attach_new`` alone) into a
    bucket on another file system cannot link its temporary there as the id's marker under
    the root: a claim of the id, taken for the write, marks it instead, and is given up once
    the file is linked in (no marker is left). Another store is refused the id while it is
    attached, and loads it once detached."""
    root, session = _bucket_elsewhere(tmp_path, other_file_system)
    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(root) as store:
            store.attach_new(session)
            await store.flush(session)
            async with JSONLStore(root) as other:
                assert await refusal(lambda: other.claim_new("s")) == DUPLICATE
            await store.detach(session)
        async with JSONLStore(root) as other:
            assert lines((await other.load("s")).events) == lines(session.events)
    assert _files(other_file_system) == ["s.jsonl"]
    markers = root / MARKERS_DIRECTORY
    assert not markers.exists() or list(markers.iterdir()) == []


async def test_jsonl_an_unclaimed_first_write_elsewhere_refused_as_stored_keeps_no_claim(
    tmp_path: Path, other_file_system: Path
) -> None:
    """R11.11: an unclaimed first write into a bucket on another file system of an id that is
    stored is refused as a duplicate, and the claim it took for the write goes with it: once
    the stored session is deleted, another writer creates the id."""
    root, session = _bucket_elsewhere(tmp_path, other_file_system)
    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(root) as store:
            store.attach_new(session)
            await store.flush(session)
            await store.detach(session)
        again = JSONLBackend(root)
        again.open()
        try:
            (refused,) = again.write([_new_batch(session)])
            assert refused is not None
            assert (type(refused).__name__, refused.code) == DUPLICATE
            async with JSONLStore(root) as store:
                await store.delete("s")
                await store.claim_new("s")
                store.attach_new(session)
                await store.flush(session)
        finally:
            again.close()
    assert _files(other_file_system) == ["s.jsonl"]
