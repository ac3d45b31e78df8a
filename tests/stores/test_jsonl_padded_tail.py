"""A JSONL file's last record followed by padding in place of its newline (R11.8): the NULs a power
loss leaves where a write never reached the disk, or a control character a flipped bit made of the
newline, are no part of any record; the record is kept by every reader and ended by the next append."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.session import Session, TurnEnd
from retinue.stores import JSONLStore
from retinue.stores._jsonl import session_path
from tests.stores._jsonl_files_kit import load_lines, session_of
from tests.stores._kit import lines, open_tool_turn, run_turn

PADDINGS = {
    "nuls-in-place-of-the-newline": b"\0" * 64,
    "a-vertical-tab-in-place-of-the-newline": b"\x0b",
    "a-space-then-nuls": b" \0\0\0",
}
TAILS = {**PADDINGS, "the-newline-then-nuls": b"\n" + b"\0" * 64}


async def _store_padded(root: Path, tail: bytes) -> tuple[Path, bytes, Session]:
    """Store a one-turn session ``s1`` at *root*, its last newline replaced by *tail*; return
    its file, the bytes stored before the edit and the session."""
    session = session_of("s1", 1)
    async with JSONLStore(root) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(root, session.header)
    stored = path.read_bytes()
    path.write_bytes(stored[:-1] + tail)
    return path, stored, session


@pytest.mark.parametrize("tail", TAILS.values(), ids=TAILS.keys())
async def test_jsonl_a_last_record_padded_in_place_of_its_newline_is_kept(
    tmp_path: Path, tail: bytes
) -> None:
    """R11.8: a reader before any load shows the padded last record (the turn it ends is not
    open), and a load keeps it: the finished turn is not closed again as interrupted, and the
    load leaves the record's bytes in the file."""
    path, stored_bytes, session = await _store_padded(tmp_path, tail)
    stored = lines(session.events)
    async with JSONLStore(tmp_path, create=False) as reader:
        seen = await reader.inspect_recovered("s1")
    assert (seen.kept, seen.dropped) == (len(stored), 0)
    assert lines(seen.session.events) == stored
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("s1")
        await store.detach(loaded)
    assert lines(loaded.events) == stored
    assert isinstance(loaded.events[-1].data, TurnEnd)
    assert loaded.events[-1].data.reason.kind == "completed"
    assert path.read_bytes().startswith(stored_bytes[:-1])


@pytest.mark.parametrize("load", [True, False], ids=["loaded", "attached-as-it-is"])
@pytest.mark.parametrize("tail", PADDINGS.values(), ids=PADDINGS.keys())
async def test_jsonl_an_append_after_a_padded_last_record_ends_the_record_itself(
    tmp_path: Path, tail: bytes, *, load: bool
) -> None:
    """R11.4, R11.8: the writer cuts the padding off before it ends the last record with its
    newline, so the file holds the stored bytes, then the new turn, and loads whole again."""
    path, stored_bytes, session = await _store_padded(tmp_path, tail)
    async with JSONLStore(tmp_path) as store:
        if load:
            session = await store.load("s1")
        store.attach(session)
        run_turn(session, "after the power loss")
        await store.detach(session)
    assert await load_lines(tmp_path, "s1") == lines(session.events)
    stored = path.read_bytes()
    assert stored.startswith(stored_bytes)
    assert stored.count(b"\n") == len(session.events) + 1


async def test_jsonl_a_torn_record_padded_with_nuls_is_still_cut_off(tmp_path: Path) -> None:
    """R11.8, R11.9: padding after a record a crash cut short makes it no whole record: a load
    drops it with its padding and closes the open turn as interrupted, on lines of its own."""
    session = session_of("s1", 1)
    committed = len(session.events)
    open_tool_turn(session)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    body = path.read_bytes().split(b"\n")[:-1]
    body[-1] = body[-1][:20] + b"\0" * 64
    path.write_bytes(b"\n".join(body))
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("s1")
        await store.detach(loaded)
    kept = len(body) - 2
    assert lines(loaded.events[:kept]) == lines(session.events[:kept])
    assert kept > committed
    assert isinstance(loaded.events[-1].data, TurnEnd)
    assert loaded.events[-1].data.reason.kind == "interrupted"
    assert b"\0" not in path.read_bytes()
    assert await load_lines(tmp_path, "s1") == lines(loaded.events)
