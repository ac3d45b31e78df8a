"""A JSONL log whose open final turn holds a record written whole out of seq order (a line
repeated or left out by hand): the load refuses it naming the line, and drops nothing (R11.8)."""

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
    assert caught.value.message.startswith(f"{path}, line {index + 2}: session 'mid': a seq gap")
    assert path.read_bytes() == b"\n".join(stored)
    assert len(session.events) > index
