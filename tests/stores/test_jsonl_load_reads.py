"""Loading a JSONL session reads its file once, repairs included, and cuts a torn tail exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue._content import Text
from retinue.session import Session, TurnStart, TurnTrigger, UserMessage
from retinue.session._codec import encode_event, encode_header
from retinue.stores import JSONLStore
from retinue.testing import check_session_invariants
from tests.stores._kit import lines, open_tool_turn, run_turn, tool_step

_IO = Path("/proc/self/io")


def _bytes_read() -> int:
    """Bytes this process has read so far, by any call and thread (Linux's rchar)."""
    for line in _IO.read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _file_of(root: Path, session_id: str) -> Path:
    [path] = root.glob(f"*/{session_id}.jsonl")
    return path


async def _store(root: Path, session: Session) -> Path:
    async with JSONLStore(root) as store:
        store.attach_new(session)
        await store.detach(session)
    return _file_of(root, session.id)


@pytest.mark.skipif(not _IO.is_file(), reason="no /proc/self/io to count the bytes read")
@pytest.mark.parametrize("tail", ["none", "open-turn", "torn-fragment"])
async def test_jsonl_a_load_reads_its_file_once(tmp_path: Path, tail: str) -> None:
    """R11.8, R11.9: a load claims, reads and, if need be, repairs its file reading it once:
    claiming reads nothing, and a repair knows the file's end from that one read.
    """
    session = Session.create("s1", cwd="/srv")
    for _ in range(100):
        run_turn(session)
    if tail == "open-turn":
        open_tool_turn(session)
    path = await _store(tmp_path, session)
    if tail == "torn-fragment":
        with path.open("ab") as file:
            file.write(b'{"seq":')
    size = path.stat().st_size
    async with JSONLStore(tmp_path) as store:
        assert await store.exists("s1")  # the store is open before the count starts
        before = _bytes_read()
        loaded = await store.load("s1")
        read = _bytes_read() - before
        await store.detach(loaded)
    assert lines(loaded.events[: len(session.events)]) == lines(session.events)
    assert size <= read < size * 1.25


def _open_turn(session: Session, text: str) -> None:
    """Append a turn whose user message says *text*, stopped after a tool call (a crash)."""
    turn = session.next_turn_number()
    session.append(TurnStart(turn, TurnTrigger("message")))
    session.append(UserMessage((Text(text),)), surface="append")
    tool_step(session, turn, 1, f"call-{turn}")


def _file_lines(session: Session, events: int) -> bytes:
    return "".join(
        line + "\n" for line in [encode_header(session.header), *lines(session.events[:events])]
    ).encode()


@pytest.mark.parametrize("text_size", [10, 20_000], ids=["short-lines", "long-lines"])
@pytest.mark.parametrize("damage", ["fragment", "corrupt-record"])
async def test_jsonl_a_repair_cuts_the_file_just_after_the_events_it_keeps(
    tmp_path: Path, text_size: int, damage: str
) -> None:
    """R11.8: a load cuts off exactly the torn tail, whether a fragment or a corrupt record
    with well-formed ones after it, however long the lines and fragment it cuts off
    (longer than the blocks it reads backwards): the file then holds the kept events and
    the closers.
    """
    session = Session.create("s1", cwd="/srv")
    for _ in range(3):
        run_turn(session, "x" * text_size)
    committed = len(session.events)
    _open_turn(session, "y" * text_size)
    path = await _store(tmp_path, session)
    kept = len(session.events)
    if damage == "fragment":
        torn = encode_event(session.events[committed + 1]).encode()
        path.write_bytes(path.read_bytes() + torn[: len(torn) // 2])
    else:
        kept = committed + 1  # the turn's start survives, its user message does not
        records = path.read_bytes().split(b"\n")
        records[1 + kept] = records[1 + kept][:-5]
        path.write_bytes(b"\n".join(records))
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("s1")
        await store.detach(loaded)
    check_session_invariants(loaded.events)
    assert lines(loaded.events[:kept]) == lines(session.events[:kept])
    assert path.read_bytes() == _file_lines(loaded, len(loaded.events))
