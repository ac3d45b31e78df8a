"""A JSONL log holding a record written whole out of seq order (a line repeated or left out by
hand) in its open final turn, or as its last line, ended or not: the load refuses it naming the
line, and drops nothing (R11.8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue._errors import CorruptSessionError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.stores._jsonl import session_path
from tests.stores._kit import open_tool_turn, run_turn


async def _flushed_mid_turn(root: Path) -> tuple[Session, Path]:
    """Two complete turns and an open third one, flushed (as a pre-execute flush commits a
    tool call before its body runs); the session and its file."""
    session = Session.create("mid")
    async with JSONLStore(root) as store:
        store.attach_new(session)
        run_turn(session, "one")
        run_turn(session, "two")
        open_tool_turn(session)
        await store.detach(session)
    return session, session_path(root, session.header)


@pytest.mark.parametrize("damage", ["repeated", "left out"])
async def test_jsonl_whole_record_out_of_seq_in_the_open_turn_is_refused(
    tmp_path: Path, damage: str
) -> None:
    """R11.8: a torn write leaves a line that is no JSON object, never a whole record out of
    seq order; so a load finding one in the open final turn refuses it, naming its file and
    line, rather than drop it and the committed records after it as a torn tail."""
    session, path = await _flushed_mid_turn(tmp_path)
    stored = path.read_bytes().split(b"\n")
    line = len(stored) - 4  # 1-based: a record of the open turn, three records before the end
    if damage == "repeated":
        stored.insert(line, stored[line - 1])
    else:
        del stored[line - 1]
    path.write_bytes(b"\n".join(stored))
    async with JSONLStore(tmp_path) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("mid")
    index = line - 1 if damage == "repeated" else line - 2
    assert caught.value.code == "CORRUPT_SESSION"
    wrong = (
        f"a seq stored twice (event {index} has seq {index - 1}, the seq of an earlier event)"
        if damage == "repeated"
        else f"a seq gap (event {index} has seq {index + 1})"
    )
    assert caught.value.message.startswith(f"{path}, line {index + 2}: session 'mid': {wrong}")
    assert path.read_bytes() == b"\n".join(stored)
    assert len(session.events) > index


@pytest.mark.parametrize("ending", [b"\n", b""], ids=["ended", "unended"])
async def test_jsonl_whole_last_record_out_of_seq_order_is_refused_ended_or_not(
    tmp_path: Path, ending: bytes
) -> None:
    """R11.8: a last line written whole keeps its place as a record whether or not it ends in
    a newline (a hand edit saved without one), so a committed ``turn/end`` that a line left out
    puts out of seq order is refused, naming its line, and neither dropped nor replaced by an
    ``interrupted`` closer."""
    session = Session.create("s1")
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        run_turn(session, "one")
        run_turn(session, "two")
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    stored = path.read_bytes().split(b"\n")[:-1]
    del stored[-2]  # the step/end before the last turn/end
    edited = b"\n".join(stored) + ending
    path.write_bytes(edited)
    async with JSONLStore(tmp_path) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("s1")
    last = len(stored)
    assert caught.value.code == "CORRUPT_SESSION"
    assert caught.value.message.startswith(
        f"{path}, line {last}: session 's1': a seq gap (event {last - 2} has seq {last - 1})"
    )
    assert path.read_bytes() == edited
