"""Where a JSONL store keeps the creation markers of the ids it creates: in a directory of their
own under the root, so the root lists the cwd buckets alone, and an id's lookup reads as much
whatever the number of agents created and not yet stored (R11.11, R11.12)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import retinue
from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.stores._backend import AppendBatch
from retinue.stores._jsonl import JSONLBackend, session_path
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS
from tests.stores._jsonl_files_kit import descriptors_filled, session_of
from tests.stores._kit import REAL_DEADLINE, attach_undrained, lines, run_turn

MARKERS = ".creating"


def _new_batch(session: Session) -> AppendBatch:
    return AppendBatch(session.id, 0, tuple(session.events), header=session.header)


def _root_names(root: Path) -> set[str]:
    return {path.name for path in root.iterdir()}


async def test_jsonl_agents_created_and_not_stored_leave_the_root_to_the_buckets(
    tmp_path: Path,
) -> None:
    """Each agent created holds its id's marker until its first checkpoint; the markers lie
    in the markers' directory, so the root, read by every lookup of an id, lists the buckets
    (and that directory) however many agents are live and unstored."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(REAL_DEADLINE):
        async with retinue.open_runtime(models=model, store=JSONLStore(tmp_path)) as rt:
            stored = await rt.create_agent("a", OPTIONS, session_id="stored")
            await stored.ask("hi")
            buckets = _root_names(tmp_path) - {MARKERS}
            for index in range(20):
                await rt.create_agent("a", OPTIONS, session_id=f"new-{index}")
            assert _root_names(tmp_path) == {*buckets, MARKERS}
            assert len(list((tmp_path / MARKERS).iterdir())) == 20
            fresh = await rt.create_agent("a", OPTIONS, session_id="fresh")
            await fresh.ask("hi")
            assert _root_names(tmp_path) == {*buckets, MARKERS}
        assert list((tmp_path / MARKERS).iterdir()) == []


async def test_jsonl_two_stores_never_both_create_an_id_held_in_the_markers_directory(
    tmp_path: Path,
) -> None:
    """R11.11: an id one store claimed is refused to another, and so is a write creating it,
    at whatever cwd; released, it is the other store's, whose first write stores it."""
    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(tmp_path) as first, JSONLStore(tmp_path) as second:
            await first.claim_new("s")
            with pytest.raises(StoreError) as refused:
                await second.claim_new("s")
            assert refused.value.code == "SESSION_ALREADY_EXISTS"
            await first.release_new("s")
            await second.claim_new("s")
            session = Session.create("s", cwd="/elsewhere")
            second.attach_new(session)
            run_turn(session)
            await second.flush(session)
            await second.detach(session)
            assert lines((await first.load("s")).events) == lines(session.events)
    backend = JSONLBackend(tmp_path)
    backend.open()
    assert backend.write([_new_batch(session_of("s", 1))])[0] is not None
    backend.close()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_jsonl_open_sweeps_the_markers_directory_and_an_earlier_version_s_root(
    tmp_path: Path,
) -> None:
    """R11.3: the markers and claim temporaries a crash left are removed on open, in the
    markers' directory and in the root (where an earlier version kept them); a live one stays."""
    markers = tmp_path / MARKERS
    markers.mkdir()
    left = [markers / ".s1.0123456789abcdef.tmp", tmp_path / ".s3.0123456789abcdef.tmp"]
    for path in left:
        path.write_bytes(b"")
    left += [markers / "s1.creating", tmp_path / ".s3.creating"]
    left[2].hardlink_to(left[0])
    left[3].hardlink_to(left[1])
    live = markers / "s2.creating"
    live.write_bytes(b"")
    with _locked(live):
        JSONLBackend(tmp_path).open()
        assert [path.exists() for path in left] == [False] * 4
        assert live.exists()
    JSONLBackend(tmp_path).open()
    assert not live.exists()
    assert markers.is_dir()


async def test_jsonl_a_dot_directory_in_the_root_is_no_bucket(tmp_path: Path) -> None:
    """No bucket's name starts with a dot: a session file under a dot-directory of the root
    (the markers' one, or anything else) is no stored session to a lookup or a listing."""
    session = session_of("s", 1)
    for hidden in (MARKERS, ".backup"):
        copy = tmp_path / hidden / "s.jsonl"
        copy.parent.mkdir()
        copy.write_bytes(b"")
    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(tmp_path) as store:
            assert not await store.exists("s")
            assert (await store.list()) == []
            await store.claim_new("s")
            store.attach_new(session)
            await store.flush(session)
            await store.detach(session)
            assert [header.id for header in await store.list()] == ["s"]
    assert session_path(tmp_path, session.header).exists()


def test_jsonl_a_lookup_out_of_descriptors_says_to_raise_the_limit(tmp_path: Path) -> None:
    """Reading the root's listing to look an id up is an open as any other: out of
    descriptors, it is the session's STORAGE_ERROR saying to raise the limit, not a bare errno."""
    backend = JSONLBackend(tmp_path)
    backend.open()
    try:
        assert backend.write([_new_batch(session_of("s", 1))]) == [None]
        backend.release("s")
        for lookup in (lambda: backend.contains("s"), lambda: backend.read("s")):
            with descriptors_filled(), pytest.raises(StoreError) as failed:
                lookup()
            assert failed.value.code == "STORAGE_ERROR"
            assert "ran out of open files" in failed.value.message
            assert "raise the limit" in failed.value.message
            assert isinstance(failed.value.__cause__, OSError)
            assert failed.value.__cause__.errno == errno.EMFILE
    finally:
        backend.close()


async def test_jsonl_a_first_write_of_an_id_another_store_claims_says_who_has_it(
    tmp_path: Path,
) -> None:
    """An id another store claimed is listed nowhere yet: a write creating it (an import's)
    is refused saying another store or process holds it, not that it exists."""
    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(tmp_path) as holder, JSONLStore(tmp_path) as writer:
            await holder.claim_new("s")
            session = attach_undrained(writer, "s")
            with pytest.raises(StoreError) as caught:
                await writer.flush(session)
            assert caught.value.code == "SESSION_ALREADY_EXISTS"
            assert "another store or process is creating, writing or deleting it" in str(
                caught.value
            )
            assert await writer.list() == []
            await holder.release_new("s")  # so the writer's close can store what it holds
