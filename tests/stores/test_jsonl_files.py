"""The JSONL store's files: unique temporaries, one creation per id, seq checks, durable folders,
files gone or unreadable when listed or loaded.

Races between two writers are played out by hand: the second writer runs
inside the first one's sync, the moment its new file is written but not linked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.session._codec import encode_event
from retinue.stores import JSONLStore
from retinue.stores._backend import AppendBatch
from retinue.stores._jsonl import JSONLBackend, session_path
from tests.stores._jsonl_files_kit import load_lines, session_of
from tests.stores._kit import lines, run_turn


def _new_batch(session: Session) -> AppendBatch:
    return AppendBatch(session.id, 0, tuple(session.events), header=session.header)


def _append_batch(session: Session, first: int) -> AppendBatch:
    return AppendBatch(session.id, first, tuple(session.events[first:]))


def _during_sync(
    monkeypatch: pytest.MonkeyPatch, backend: JSONLBackend, step: Callable[[], None]
) -> None:
    """Run *step* once, inside *backend*'s next sync (its new files written, not yet linked)."""
    real_sync = backend._sync
    pending = [step]

    def sync(fds: list[int]) -> None:
        if pending:
            pending.pop()()
        real_sync(fds)

    monkeypatch.setattr(backend, "_sync", sync)


def _refusal(backend: JSONLBackend, batch: AppendBatch) -> str | None:
    """The code *backend* refuses *batch* with, ``None`` if it commits it (raising if it fails)."""
    [result] = backend.write([batch])
    return None if result is None else result.code


@pytest.fixture
def backends(tmp_path: Path) -> Iterator[tuple[JSONLBackend, JSONLBackend]]:
    first, second = JSONLBackend(tmp_path), JSONLBackend(tmp_path)
    first.open()
    second.open()
    yield first, second
    first.close()
    second.close()


async def test_jsonl_two_stores_creating_one_id_never_share_a_temporary_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backends: tuple[JSONLBackend, JSONLBackend],
) -> None:
    """R11.3: a second writer of a new id neither truncates the first one's unlinked file
    nor fails with a storage error: it is refused SESSION_ALREADY_EXISTS, and the
    acknowledged session loads whole.
    """
    first, second = backends
    winner, loser = session_of("s1", 2), session_of("s1", 1)
    seen: list[str | None] = []
    _during_sync(monkeypatch, first, lambda: seen.append(_refusal(second, _new_batch(loser))))

    assert first.write([_new_batch(winner)]) == [None]
    assert seen == ["SESSION_ALREADY_EXISTS"]
    first.close()
    assert await load_lines(tmp_path, "s1") == lines(winner.events)


def test_jsonl_one_id_cannot_be_created_under_two_cwds_at_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backends: tuple[JSONLBackend, JSONLBackend],
) -> None:
    """R11.11: a same id at another cwd is a collision, also while the first file is
    being created: the second creation is refused and only one file holds the id.
    """
    first, second = backends
    at_a, at_b = session_of("dup", 1, cwd="/project/a"), session_of("dup", 2, cwd="/project/b")
    seen: list[str | None] = []
    _during_sync(monkeypatch, first, lambda: seen.append(_refusal(second, _new_batch(at_b))))

    assert first.write([_new_batch(at_a)]) == [None]
    assert seen == ["SESSION_ALREADY_EXISTS"]
    assert [path.relative_to(tmp_path) for path in tmp_path.rglob("*.jsonl")] == [
        session_path(tmp_path, at_a.header).relative_to(tmp_path)
    ]
    assert _refusal(second, _new_batch(at_b)) == "SESSION_ALREADY_EXISTS"


def test_jsonl_a_creation_marker_left_by_a_crash_does_not_block_the_id(
    tmp_path: Path, backends: tuple[JSONLBackend, JSONLBackend]
) -> None:
    """R11.3: the marker a crashed creator left (its lock died with it) is replaced."""
    first, _ = backends
    marker = tmp_path / ".creating" / "dup.creating"
    marker.parent.mkdir(exist_ok=True)
    marker.write_bytes(b"")
    assert _refusal(first, _new_batch(session_of("dup", 1))) is None
    assert not marker.exists()


def test_jsonl_an_append_that_does_not_continue_the_stored_log_is_refused(
    backends: tuple[JSONLBackend, JSONLBackend],
) -> None:
    """R11.4: an append from an out-of-date session is a SEQ_CONFLICT, as in the other
    stores, and leaves the stored log as it was.
    """
    first, second = backends
    session = session_of("s1", 1)
    stored = len(session.events)
    assert first.write([_new_batch(session)]) == [None]
    first.release("s1")
    run_turn(session)
    stale = _append_batch(session, stored - 1)

    assert _refusal(second, stale) == "SEQ_CONFLICT"
    assert second.read("s1") is not None
    assert _refusal(second, _append_batch(session, stored)) is None
    assert _refusal(second, _append_batch(session, stored)) == "SEQ_CONFLICT"


def test_jsonl_the_stored_count_follows_a_repair_and_a_failed_group(
    monkeypatch: pytest.MonkeyPatch, backends: tuple[JSONLBackend, JSONLBackend]
) -> None:
    """R11.5, R11.8: after a torn tail is cut, and after a failed group is undone, the
    next append must start exactly where the file now ends.
    """
    first, _ = backends
    session = session_of("s1", 2)
    path = session_path(first._root, session.header)
    kept = len(session.events) - 3
    assert first.write([_new_batch(session)]) == [None]
    first.release("s1")
    with path.open("ab") as file:
        file.write(b'{"torn')

    assert _refusal(first, _append_batch(session, len(session.events))) == "SEQ_CONFLICT"
    repair = AppendBatch("s1", kept, (), truncate_to=kept)
    assert _refusal(first, repair) is None
    _during_sync(monkeypatch, first, _raise_io_error)
    with pytest.raises(OSError, match="Input/output"):
        first.write([_append_batch(session, kept)])
    assert _refusal(first, _append_batch(session, len(session.events))) == "SEQ_CONFLICT"
    assert _refusal(first, _append_batch(session, kept)) is None
    assert path.read_bytes().count(b"\n") == len(session.events) + 1


def _raise_io_error() -> None:
    raise OSError(5, "Input/output error")


def test_jsonl_a_torn_fragment_is_never_appended_to(
    backends: tuple[JSONLBackend, JSONLBackend],
) -> None:
    """R11.8: only a repair may write after a torn fragment: an append would glue its
    first event to the fragment.
    """
    first, _ = backends
    session = session_of("s1", 1)
    stored = len(session.events)
    assert first.write([_new_batch(session)]) == [None]
    first.release("s1")
    with session_path(first._root, session.header).open("ab") as file:
        file.write(encode_event(session.events[-1]).encode()[:10])
    run_turn(session)

    assert _refusal(first, _append_batch(session, stored)) == "SEQ_CONFLICT"


def _synced_directories(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record every directory fsynced (or fdatasynced) from now on."""
    synced: list[Path] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def record(fd: int, real: Callable[[int], None] = real) -> None:
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if target.is_dir():
                synced.append(target)
            real(fd)

        monkeypatch.setattr(os, name, record)
    return synced


def test_jsonl_every_created_folder_is_synced_into_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.4: a new session is durable only once its cwd folder (and the root made by
    open) are entries of their parents on disk.
    """
    root = tmp_path / "made" / "root"
    backend = JSONLBackend(root)
    synced = _synced_directories(monkeypatch)
    backend.open()
    assert synced == [tmp_path, tmp_path / "made"]
    synced.clear()
    session = session_of("s1", 1, cwd="/srv")

    assert backend.write([_new_batch(session)]) == [None]
    backend.close()
    assert root in synced
    assert session_path(root, session.header).parent in synced


def test_jsonl_open_removes_only_temporary_files_no_writer_holds(tmp_path: Path) -> None:
    """R11.3: temporaries and creation markers a crash left are removed on open (they hold a
    first batch each); a live writer's stay.
    """
    bucket = tmp_path / "_no-cwd"
    bucket.mkdir()
    left = [bucket / ".s1.jsonl.4242.tmp", bucket / ".s2.jsonl.0123456789abcdef.tmp"]
    for path in left:
        path.write_bytes(b"{}\n")
    left.append(tmp_path / ".s2.creating")
    left[-1].hardlink_to(left[-2])
    live = bucket / ".s3.jsonl.fedcba9876543210.tmp"
    live.write_bytes(b"{}\n")
    fd = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        JSONLBackend(tmp_path).open()
        assert [path.exists() for path in left] == [False, False, False]
        assert live.exists()
    finally:
        os.close(fd)
    JSONLBackend(tmp_path).open()
    assert not live.exists()


async def test_jsonl_list_passes_over_a_file_gone_since_the_listing(tmp_path: Path) -> None:
    """R11.14: a file listed and then gone (a failed creation taken out, say) is no session, and
    list() does not fail with STORAGE_ERROR. A dangling link stands for it here."""
    session = session_of("kept", 1)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.flush(session)
        ghost = session_path(tmp_path, session.header).with_name("ghost.jsonl")
        ghost.symlink_to(tmp_path / "nowhere.jsonl")
        assert [header.id for header in await store.list()] == ["kept"]


async def test_jsonl_list_names_an_entry_it_cannot_read_and_lists_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """R11.14: an entry named like a session file that cannot be read (here a directory) is
    one skipped entry, named by its path with the failure; it does not fail the listing of
    every other session."""
    session = session_of("kept", 1)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.flush(session)
        odd = session_path(tmp_path, session.header).with_name("odd.jsonl")
        odd.mkdir()
        assert [header.id for header in await store.list()] == ["kept"]
        listing = await store.listing()
        assert [header.id for header in listing.headers] == ["kept"]
        assert [(skipped.stored_as, skipped.problem) for skipped in listing.skipped] == [
            (str(odd), f"{odd}: cannot read its header: Is a directory")
        ]
    assert f"{odd}: cannot read its header" in caplog.text


async def test_jsonl_a_file_where_the_directory_should_be_is_named_as_not_one(
    tmp_path: Path,
) -> None:
    """Opening a JSONL store on a path a file holds fails saying it is not a directory
    (not the ``File exists`` of the ``mkdir`` that met it), and the file is left alone."""
    taken = tmp_path / "sessions"
    taken.write_text("notes")
    with pytest.raises(StoreError, match=r"NotADirectoryError: .*not a directory: '.*sessions'"):
        async with JSONLStore(taken):
            pass
    assert taken.read_text() == "notes"


def test_jsonl_a_fragment_is_torn_to_its_claimer_and_unwritten_to_other_readers(
    backends: tuple[JSONLBackend, JSONLBackend],
) -> None:
    """R11.8: an unterminated last line is a torn fragment to the store that claimed the
    file (however often it reads it: a read beside the load's may measure it first), and a
    write still under way to a store reading beside it, which leaves it out unreported.
    """
    first, second = backends
    session = session_of("s1", 1)
    assert first.write([_new_batch(session)]) == [None]
    first.release("s1")
    with session_path(first._root, session.header).open("ab") as file:
        file.write(b'{"seq":')
    first.claim("s1")
    for reader, torn in ((first, True), (first, True), (second, False)):
        stored = reader.read("s1")
        assert stored is not None
        assert len(stored.records) == len(session.events)
        assert stored.torn_fragment is torn


async def test_jsonl_a_file_taken_out_as_a_load_locks_it_is_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a load that opens a session file just before its holder takes it out (a
    failed creation undone in another store) does not lock and load the removed file:
    writes to it would be acknowledged and lost with it. The session is not stored."""
    session = session_of("s1", 1)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    stored = path.stat()
    real_flock = fcntl.flock

    def flock_after_removal(fd: int, operation: int) -> None:
        held = os.fstat(fd)
        if operation & fcntl.LOCK_EX and path.exists() and os.path.samestat(held, stored):
            path.unlink()  # by the file's holder, between the load's open and its lock
        real_flock(fd, operation)

    async with JSONLStore(tmp_path) as store:
        monkeypatch.setattr(fcntl, "flock", flock_after_removal)
        with pytest.raises(StoreError) as caught:
            await store.load("s1")
    assert caught.value.code == "SESSION_NOT_FOUND"


async def test_jsonl_a_file_gone_between_its_lookup_and_its_read_is_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session file removed just after a read found it (a failed creation taken out
    again, or the file deleted) is a session not stored, as it would be a moment later,
    not a storage failure."""
    session = session_of("s1", 1)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    found = JSONLBackend._only_stored

    def found_then_removed(backend: JSONLBackend, session_id: str) -> Path | None:
        path = found(backend, session_id)
        if path is not None:
            path.unlink()
        return path

    monkeypatch.setattr(JSONLBackend, "_only_stored", found_then_removed)
    async with JSONLStore(tmp_path, create=False) as reader:
        with pytest.raises(StoreError) as caught:
            await reader.inspect("s1")
    assert caught.value.code == "SESSION_NOT_FOUND"
