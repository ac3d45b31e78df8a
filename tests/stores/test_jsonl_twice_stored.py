"""A JSONL store whose root holds two files of one id, one per cwd bucket (R11.12): a load
or a read names both files rather than take whichever the directory lists first."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from retinue._errors import CorruptSessionError, StoreError
from retinue.session import Session, TurnStart, TurnTrigger
from retinue.stores import JSONLStore, Listing, SkippedSession
from retinue.stores._jsonl import session_path
from tests.stores._cli_kit import cli
from tests.stores._jsonl_files_kit import load_lines, session_of
from tests.stores._kit import lines, run_turn


async def _stored_twice(root: Path) -> list[Path]:
    """Store session ``s1`` of two turns at no cwd, and a copy of one turn at another cwd
    put beside it by hand (a file copied in): two logs of the one id."""
    session = session_of("s1", 2)
    other = session_of("s1", 1, cwd="/elsewhere")
    async with JSONLStore(root / "store") as store:
        store.attach_new(session)
        await store.detach(session)
    async with JSONLStore(root / "copy") as store:
        store.attach_new(other)
        await store.detach(other)
    placed = session_path(root / "store", other.header)
    placed.parent.mkdir()
    session_path(root / "copy", other.header).rename(placed)
    return sorted([session_path(root / "store", session.header), placed])


def _unlocked(path: Path) -> bool:
    """Whether no writer holds the file at *path* locked (a claim of it does)."""
    with path.open("rb") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(file, fcntl.LOCK_UN)
        return True


async def test_jsonl_load_of_an_id_stored_in_two_buckets_names_both_files(
    tmp_path: Path,
) -> None:
    """R11.12, R11.8: a load of an id whose file lies in two cwd buckets is refused,
    naming both files, and claims neither: which log is the session's no file says."""
    paths = await _stored_twice(tmp_path)
    async with JSONLStore(tmp_path / "store") as store:
        with pytest.raises(CorruptSessionError) as loading:
            await store.load("s1")
        with pytest.raises(CorruptSessionError) as reading:
            await store.inspect("s1")
        assert await store.exists("s1")
        assert [_unlocked(path) for path in paths] == [True, True]
    named = f"session 's1' is stored in 2 files: {paths[0]}, {paths[1]}; "
    for caught in (loading, reading):
        assert (caught.value.code, caught.value.message) == (
            "CORRUPT_SESSION",
            named + "keep its log and remove the others",
        )


@pytest.mark.parametrize("link", ["linked bucket", "hard link"])
async def test_jsonl_one_file_reached_from_two_buckets_is_one_log(
    tmp_path: Path, link: str
) -> None:
    """R11.12: a bucket that is a link to another (the one project reached by a second path), or
    a hard link of the file in another bucket, is the one file under two names: the load takes
    it, and appends to it, rather than refuse it as two logs and have the one removed."""
    session = session_of("s1", 2, cwd="/home/me/proj")
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    if link == "linked bucket":
        (tmp_path / "cwd-000000000000").symlink_to(path.parent.name)
    else:
        (tmp_path / "_no-cwd").mkdir()
        os.link(path, tmp_path / "_no-cwd" / path.name)
    async with JSONLStore(tmp_path) as store:
        inspected = await store.inspect("s1")
        loaded = await store.load("s1")
        store.attach(loaded)
        run_turn(loaded, "after")
        await store.detach(loaded)
    assert lines(inspected.events) == lines(session.events)
    assert len(loaded.events) > len(session.events)
    assert await load_lines(tmp_path, "s1") == lines(loaded.events)


async def test_jsonl_flush_of_an_id_stored_in_two_buckets_is_refused_naming_both_files(
    tmp_path: Path,
) -> None:
    """R11.12, R11.4: a session attached as it is, without a load, whose id is stored in two
    buckets, has its flush refused CORRUPT_SESSION naming both files, as a load is, not failed
    as the store's write failing; another session's flush in the store goes through."""
    paths = await _stored_twice(tmp_path)
    refusals: list[StoreError] = []
    fresh = Session.create("s2")
    with pytest.raises(StoreError, match="could not be drained"):
        await _flush_both(tmp_path / "store", fresh, refusals)
    [refusal] = refusals
    named = f"session 's1' is stored in 2 files: {paths[0]}, {paths[1]}; "
    assert (refusal.code, refusal.message) == (
        "CORRUPT_SESSION",
        named + "keep its log and remove the others",
    )
    # Its open turn is closed on load, after the one event it flushed.
    assert (await load_lines(tmp_path / "store", "s2"))[:1] == lines(fresh.events)


async def _flush_both(root: Path, fresh: Session, refusals: list[StoreError]) -> None:
    """Attach a copy of ``s1`` as it is and the new session *fresh* to a JSONL store at *root*,
    append to both, and flush them together, noting the refusal of ``s1``'s flush."""
    async with JSONLStore(root) as store:
        copy = session_of("s1", 2)
        store.attach(copy)
        run_turn(copy, "after")
        store.attach_new(fresh)
        fresh.append(TurnStart(1, TurnTrigger("message")))

        async def flush_copy() -> None:
            with pytest.raises(StoreError) as caught:
                await store.flush(copy)
            refusals.append(caught.value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flush_copy)
            nursery.start_soon(store.flush, fresh)


async def test_jsonl_listing_names_an_id_stored_in_two_buckets_as_skipped(tmp_path: Path) -> None:
    """R11.14, R11.12: a listing leaves out an id whose file lies in two cwd buckets, naming
    both files with the problem a load of it is refused with, rather than list it twice."""
    paths = await _stored_twice(tmp_path)
    async with JSONLStore(tmp_path / "store") as store:
        listing = await store.listing()
    named = f"session 's1' is stored in 2 files: {paths[0]}, {paths[1]}; "
    assert listing == Listing(
        (), (SkippedSession(str(paths[0]), named + "keep its log and remove the others"),)
    )


async def test_jsonl_listing_lists_one_file_reached_from_two_buckets_once(tmp_path: Path) -> None:
    """R11.14, R11.12: a bucket linked to another lists its sessions once, as one file each."""
    session = session_of("s1", 1, cwd="/home/me/proj")
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    bucket = session_path(tmp_path, session.header).parent
    (tmp_path / "cwd-000000000000").symlink_to(bucket.name)
    async with JSONLStore(tmp_path) as store:
        listing = await store.listing()
    assert listing == Listing((session.header,))


def test_cli_sessions_list_names_an_id_stored_in_two_buckets_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R11.14: ``retinue sessions list`` names on stderr an id stored in two buckets, with both
    files, lists it on neither line, and exits 1, as ``show`` and ``export`` of it fail."""
    paths = trio.run(_stored_twice, tmp_path)
    assert cli("--store", f"jsonl:{tmp_path / 'store'}", "list") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"retinue sessions list: skipped session 's1' is stored in 2 files: {paths[0]}, "
        f"{paths[1]}; keep its log and remove the others\n"
    )


async def _two_buckets(root: Path) -> Path:
    """Store ``s1`` at no cwd and ``s2`` at another cwd; the other cwd's bucket."""
    first, second = session_of("s1", 1), session_of("s2", 1, cwd="/elsewhere")
    async with JSONLStore(root) as store:
        for session in (first, second):
            store.attach_new(session)
            await store.detach(session)
    return session_path(root, second.header).parent


async def test_jsonl_load_beside_a_bucket_it_may_not_search_names_that_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bucket this user may not search (another user's, under ``umask 077``) fails a load
    of an id stored elsewhere as the storage error it is, naming the path, where it was
    counted as a second copy and the load refused telling to remove the others."""
    barred = await _two_buckets(tmp_path)
    real_stat = Path.stat

    def stat(path: Path, **options: bool) -> os.stat_result:
        if path.parent == barred:
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, **options)

    monkeypatch.setattr(Path, "stat", stat)
    async with JSONLStore(tmp_path) as store:
        with pytest.raises(StoreError) as caught:
            await store.load("s1")
    assert caught.value.code == "STORAGE_ERROR"
    assert str(barred / "s1.jsonl") in caught.value.message
    assert "Permission denied" in caught.value.message


async def test_jsonl_listing_passes_over_a_bucket_gone_since_it_was_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bucket removed between the listing of the buckets and the listing of its files
    (a session taken out by hand, its bucket with it) is passed over, where the listing
    failed with the ``FileNotFoundError``."""
    gone = await _two_buckets(tmp_path)
    real_glob = Path.glob

    def glob(path: Path, pattern: str) -> object:
        if path == gone:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_glob(path, pattern)

    monkeypatch.setattr(Path, "glob", glob)
    async with JSONLStore(tmp_path) as store:
        listing = await store.listing()
    assert [header.id for header in listing.headers] == ["s1"]
    assert listing.skipped == ()


async def test_jsonl_listing_passes_over_a_bucket_replaced_by_a_file_after_its_files_were_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bucket replaced by a file between the listing of its files and the read of their
    headers is passed over, as a bucket removed then is, where its session was reported
    skipped ("Not a directory") and ``retinue sessions list`` exited 1."""
    replaced = await _two_buckets(tmp_path)
    real_open = Path.open

    def open_(path: Path, *args: Any, **options: Any) -> Any:
        if path.parent == replaced:
            raise NotADirectoryError(20, "Not a directory", str(path))
        return real_open(path, *args, **options)

    monkeypatch.setattr(Path, "open", open_)
    async with JSONLStore(tmp_path) as store:
        listing = await store.listing()
    assert [header.id for header in listing.headers] == ["s1"]
    assert listing.skipped == ()
