"""A live JSONL session file written or cut by something that ignores its lock (R11.4)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.stores._jsonl import session_path
from tests.stores._kit import run_turn


def _line_added(content: bytes) -> bytes:
    return content + b'{"note": "added by hand"}\n'


def _fragment_added(content: bytes) -> bytes:
    return content + b'{"seq": 22, "ti'


def _last_line_cut(content: bytes) -> bytes:
    return content[: content.rindex(b"\n", 0, -1) + 1]


@pytest.mark.parametrize("change", [_line_added, _fragment_added, _last_line_cut])
async def test_jsonl_append_after_the_file_changed_under_the_store_is_refused(
    tmp_path: Path, change: Callable[[bytes], bytes]
) -> None:
    """R11.4: once something that ignores the lock wrote to or cut a live session's file, the next
    flush is refused SEQ_CONFLICT and appends nothing, its events kept buffered, as the SQL stores
    refuse an append after another writer's: an append after the foreign bytes, acknowledged, would
    leave a session that no longer loads."""
    session = Session.create("edited", created_at=1)
    store = JSONLStore(tmp_path)
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    path = session_path(tmp_path, session.header)
    changed = change(path.read_bytes())
    path.write_bytes(changed)
    run_turn(session, "after the change")
    with pytest.raises(StoreError) as refused:
        await store.flush(session)
    buffered = store.statistics().buffered_events
    with pytest.raises(StoreError):
        await store.aclose()  # the drain is refused alike
    assert refused.value.code == "SEQ_CONFLICT"
    assert buffered == 22
    assert path.read_bytes() == changed


def _removed(path: Path) -> None:
    path.unlink()


def _replaced_by_a_copy(path: Path) -> None:
    copy = path.with_name("copy.tmp")
    copy.write_bytes(path.read_bytes())
    copy.replace(path)


def _moved_away(path: Path) -> None:
    path.replace(path.with_name("moved.tmp"))


def _removed_beside_a_hard_link(path: Path) -> None:
    os.link(path, path.with_name("snapshot.tmp"))
    path.unlink()


@pytest.mark.parametrize(
    "take_out", [_removed, _replaced_by_a_copy, _moved_away, _removed_beside_a_hard_link]
)
async def test_jsonl_append_to_a_live_file_taken_out_of_place_is_refused(
    tmp_path: Path, take_out: Callable[[Path], None]
) -> None:
    """R11.4: a live session's file removed, or replaced by a rename, under the store is appended to
    no more: the flush is refused SESSION_NOT_FOUND naming the file, its events kept buffered, not
    appended to the file out of place and acknowledged, to be lost with it."""
    session = Session.create("moved", created_at=1)
    store = JSONLStore(tmp_path)
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    path = session_path(tmp_path, session.header)
    take_out(path)
    in_place = path.read_bytes() if path.exists() else None
    run_turn(session, "after the file was taken out")
    with pytest.raises(StoreError) as refused:
        await store.flush(session)
    buffered = store.statistics().buffered_events
    with pytest.raises(StoreError):
        await store.aclose()
    assert refused.value.code == "SESSION_NOT_FOUND"
    assert str(path) in refused.value.message
    assert buffered == 22
    assert (path.read_bytes() if path.exists() else None) == in_place
