"""The lines of a JSONL session file as a load reads them: a missing header, a corrupt line named by
its file and number, a header or last line without its newline (R11.8, R11.13)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retinue._errors import CorruptSessionError, StoreError
from retinue.session import Session
from retinue.session._codec import encode_event, encode_header
from retinue.stores import JSONLStore
from retinue.stores._jsonl import session_path
from tests.stores._jsonl_files_kit import load_lines, session_of
from tests.stores._kit import lines, open_tool_turn, run_turn


@pytest.mark.parametrize("content", [b"", b"\n", b"  \n"], ids=["zero-bytes", "newline", "blank"])
async def test_jsonl_session_file_without_a_header_is_named_empty(
    tmp_path: Path, content: bytes
) -> None:
    """R11.14, R11.8: a session file holding no header line is listed as skipped and refused
    by a load, each saying the header is empty rather than quoting a JSON parser."""
    bucket = tmp_path / "_no-cwd"
    bucket.mkdir()
    (bucket / "hollow.jsonl").write_bytes(content)
    async with JSONLStore(tmp_path) as store:
        listing = await store.listing()
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("hollow")
    assert listing.headers == ()
    assert [skipped.problem.endswith("the header is empty") for skipped in listing.skipped] == [
        True
    ]
    assert (caught.value.code, caught.value.message) == (
        "CORRUPT_HEADER",
        f"{bucket / 'hollow.jsonl'}, line 1: session 'hollow': the header is empty",
    )


def _stored_lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        ("not JSON", "CORRUPT_SESSION"),
        ("unknown field", "UNKNOWN_FIELD"),
        ("seq gap", "CORRUPT_SESSION"),
        ("invariant", "CORRUPT_SESSION"),
        ("header", "CORRUPT_HEADER"),
        ("version", "UNSUPPORTED_VERSION"),
    ],
)
async def test_jsonl_a_corrupt_line_is_named_by_its_file_and_line(
    tmp_path: Path, damage: str, code: str
) -> None:
    """R11.8, R11.13: a load refusing a corrupt line of a JSONL file names the file and the
    line's 1-based number, as a JSONL tool does, and still says what it said."""
    session = session_of("s1", 2)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    stored = _stored_lines(path)
    number = {"header": 1, "version": 1, "invariant": 3}.get(damage, 5)  # event number - 2
    line = stored[number - 1]
    stored[number - 1] = {
        "not JSON": line[:-1],
        "unknown field": line[:-1] + b',"extra":1}',
        "seq gap": encode_event(session.events[4]).encode(),
        "invariant": line.replace(b',"surface_op":"append"', b""),
        "header": b'{"type":"session"',
        "version": line.replace(b'"version":0', b'"version":7'),
    }[damage]
    assert stored[number - 1] != line
    path.write_bytes(b"\n".join(stored) + b"\n")
    async with JSONLStore(tmp_path) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("s1")
    assert caught.value.code == code
    assert caught.value.message.startswith(f"{path}, line {number}: session 's1': ")
    assert ("event 3" in caught.value.message) is (damage in ("not JSON", "seq gap"))
    if damage == "invariant":
        assert "breaks an invariant" in caught.value.message
        assert "seq 1" in caught.value.message


async def test_jsonl_a_header_without_its_newline_is_kept_by_a_load(tmp_path: Path) -> None:
    """R11.8: a file holding only its header line, its newline missing (say, an editor
    stripped it), has no records and so no torn tail: a load keeps the header intact."""
    session = Session.create("bare")
    path = session_path(tmp_path, session.header)
    path.parent.mkdir()
    header = encode_header(session.header).encode()
    path.write_bytes(header)
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("bare")
        await store.detach(loaded)
    assert len(loaded.events) == 0
    assert path.read_bytes() == header


async def test_jsonl_a_header_without_its_newline_takes_appends(tmp_path: Path) -> None:
    """R11.4, R11.8: a loaded file holding only its header line, its newline missing,
    takes the session's appends: the writer ends the header line first, so the flush is
    no SEQ_CONFLICT and every committed event loads again after the header."""
    session = Session.create("bare")
    path = session_path(tmp_path, session.header)
    path.parent.mkdir()
    header = encode_header(session.header).encode()
    path.write_bytes(header)
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("bare")
        store.attach(loaded)
        run_turn(loaded, "after the hand edit")
        await store.detach(loaded)
    assert path.read_bytes().startswith(header + b"\n")
    assert await load_lines(tmp_path, "bare") == lines(loaded.events)


async def test_jsonl_a_failed_append_to_a_header_without_its_newline_is_retried_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5: a group that fails after ending a bare header line is cut back to the header
    as it was, and the retried flush ends the line again: one newline, no events twice."""
    session = Session.create("bare")
    path = session_path(tmp_path, session.header)
    path.parent.mkdir()
    header = encode_header(session.header).encode()
    path.write_bytes(header)
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("bare")
        store.attach(loaded)
        run_turn(loaded)
        real_sync = os.fdatasync
        failures = [OSError(5, "Input/output error")]

        def failing_sync(fd: int) -> None:
            if failures:
                raise failures.pop()
            real_sync(fd)

        monkeypatch.setattr(os, "fdatasync", failing_sync)
        with pytest.raises(StoreError):
            await store.flush(loaded)
        assert path.read_bytes() == header
        await store.detach(loaded)
    assert await load_lines(tmp_path, "bare") == lines(loaded.events)


async def test_jsonl_a_last_event_without_its_newline_is_kept_and_appended_after(
    tmp_path: Path,
) -> None:
    """R11.8: a last event line whose newline is missing (an editor stripped it, or a crash
    cut only the newline) but which is the whole next event is no torn fragment: a reader
    shows it, a load keeps it (the finished turn is not closed again as interrupted), and
    the writer ends the line before the next append, so every event loads again."""
    session = session_of("s1", 1)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    async with JSONLStore(tmp_path, create=False) as reader:
        seen = await reader.inspect_recovered("s1")
    assert (seen.kept, seen.dropped) == (len(session.events), 0)
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("s1")
        assert lines(loaded.events) == lines(session.events)
        store.attach(loaded)
        run_turn(loaded, "after the hand edit")
        await store.detach(loaded)
    assert await load_lines(tmp_path, "s1") == lines(loaded.events)


async def test_jsonl_a_whole_last_record_without_its_newline_is_never_dropped_as_torn(
    tmp_path: Path,
) -> None:
    """R11.8: a last line missing only its newline was written whole, so a record there that
    this version cannot read (a key no field holds) fails the load naming its file and line,
    as it would with its newline; it is not discarded as a torn fragment."""
    session = session_of("s1", 1)
    open_tool_turn(session)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    stored = path.read_bytes().split(b"\n")[:-1]
    stored[-1] = stored[-1][:-1] + b',"colour":"red"}'
    path.write_bytes(b"\n".join(stored))
    async with JSONLStore(tmp_path) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("s1")
    assert caught.value.code == "UNKNOWN_FIELD"
    assert caught.value.message.startswith(f"{path}, line {len(stored)}: ")
    assert path.read_bytes() == b"\n".join(stored)


async def test_jsonl_a_whole_last_line_after_a_torn_record_goes_with_the_torn_tail(
    tmp_path: Path,
) -> None:
    """R11.8: past the committed region, a record torn by a power loss is dropped with
    every record after it, the last one too when it is whole but lacks its newline; the
    file is cut back to the kept events, which the closers follow on lines of their own."""
    session = session_of("s1", 1)
    committed = len(session.events)
    open_tool_turn(session)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    stored = path.read_bytes().split(b"\n")[:-1]
    stored[committed + 3] = stored[committed + 3][:20]
    path.write_bytes(b"\n".join(stored))
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("s1")
        await store.detach(loaded)
    assert lines(loaded.events[: committed + 2]) == lines(session.events[: committed + 2])
    assert await load_lines(tmp_path, "s1") == lines(loaded.events)


async def test_jsonl_a_last_event_without_its_newline_takes_appends_of_a_session_not_loaded(
    tmp_path: Path,
) -> None:
    """R11.4, R11.8: a session attached as it is, without a load, appends after a last event line
    missing only its newline as a load's session does: the writer counts the line, ends it first and
    stores the new turn, not refusing the flush SEQ_CONFLICT as if the stored log had as many events
    as the append's first seq."""
    session = session_of("s1", 1)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    async with JSONLStore(tmp_path) as store:
        store.attach(session)
        run_turn(session, "after the hand edit")
        await store.detach(session)
    assert await load_lines(tmp_path, "s1") == lines(session.events)


async def test_jsonl_a_last_line_whole_but_not_the_next_event_takes_no_append(
    tmp_path: Path,
) -> None:
    """R11.4, R11.8: a whole last line without its newline is appended after only when it is the
    next event's record: after a copy of the line before it the append is refused SEQ_CONFLICT,
    naming the line as a whole record out of seq order (no crash's), and the file is left as it
    was, its load refusing the copy by its line, not dropping it."""
    session, committed = await _stored_ending_in_a_copy(tmp_path)
    path = session_path(tmp_path, session.header)
    edited = path.read_bytes()
    refusals: list[StoreError] = []
    with pytest.raises(StoreError, match="could not be drained"):
        await _append_after_attach(tmp_path, session, refusals)
    [refusal] = refusals
    where = f"session 's1': {path}, line {committed + 2}"
    assert refusal.code == "SEQ_CONFLICT"
    assert refusal.message == (
        f"{where} is a record written whole that is not event {committed}'s, or that this "
        "version cannot read: nothing is appended after it, and a load refuses it"
    )
    assert path.read_bytes() == edited
    await _load_refuses_the_copy(tmp_path, path, committed)
    assert path.read_bytes() == edited


async def test_jsonl_an_inspect_does_not_let_an_append_follow_a_line_not_the_next_event(
    tmp_path: Path,
) -> None:
    """R11.4, R11.8: a read of the file (``inspect``) judges its whole last line as the writer does:
    a copy of the line before it is no record to append after, so the read does not count it, nor
    the next flush write after it; the file is left for its load to refuse the copy by its line."""
    session, committed = await _stored_ending_in_a_copy(tmp_path)
    path = session_path(tmp_path, session.header)
    edited = path.read_bytes()
    codes: list[str] = []
    with pytest.raises(StoreError, match="could not be drained"):
        await _flush_and_inspect_twice(tmp_path, session, codes)
    assert codes == ["SEQ_CONFLICT", "CORRUPT_SESSION"] * 2
    assert path.read_bytes() == edited
    await _load_refuses_the_copy(tmp_path, path, committed)
    assert path.read_bytes() == edited


async def test_jsonl_an_append_after_a_torn_line_names_the_file_and_line_until_a_load(
    tmp_path: Path,
) -> None:
    """R11.8: a session attached without a load is not appended after a line a crash cut short: the
    refusal names the file and line, neither counting the line as an event nor blaming another
    writer; a load then cuts the line off and keeps every event."""
    session = session_of("s1", 1)
    stored = lines(session.events)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(tmp_path, session.header)
    with path.open("ab") as file:
        file.write(b'{"seq":')
    refusals: list[StoreError] = []
    with pytest.raises(StoreError, match="could not be drained"):
        await _append_after_attach(tmp_path, session, refusals)
    [refusal] = refusals
    assert refusal.code == "SEQ_CONFLICT"
    assert f"{path}, line {len(stored) + 2} is a write a crash cut short" in refusal.message
    assert await load_lines(tmp_path, "s1") == stored


async def _append_after_attach(root: Path, session: Session, refusals: list[StoreError]) -> None:
    """Attach *session* to a JSONL store at *root* as it is and flush a turn, noting refusals."""
    async with JSONLStore(root) as store:
        store.attach(session)
        run_turn(session, "appended")
        with pytest.raises(StoreError) as caught:
            await store.flush(session)
        refusals.append(caught.value)


async def _flush_and_inspect_twice(root: Path, session: Session, codes: list[str]) -> None:
    """Attach *session* as it is, log a turn, then twice flush it and inspect the file, noting
    the code of each refusal."""
    async with JSONLStore(root) as store:
        store.attach(session)
        run_turn(session, "after the hand edit")
        for _ in range(2):
            with pytest.raises(StoreError) as flushing:
                await store.flush(session)
            with pytest.raises(CorruptSessionError) as reading:
                await store.inspect("s1")
            codes += [str(flushing.value.code), str(reading.value.code)]


async def _load_refuses_the_copy(root: Path, path: Path, committed: int) -> None:
    """Load ``s1`` from *root*: refused CORRUPT_SESSION at the copy ending *path*, its
    *committed* events' last line repeated."""
    async with JSONLStore(root) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("s1")
    assert caught.value.code == "CORRUPT_SESSION"
    assert caught.value.message.startswith(
        f"{path}, line {committed + 2}: session 's1': a seq stored twice "
        f"(event {committed} has seq {committed - 1}, the seq of an earlier event)"
    )


async def _stored_ending_in_a_copy(root: Path) -> tuple[Session, int]:
    """Store a one-turn session at *root*, then make its last line, without its newline, a
    copy of the line before it; returns the session and how many events stay committed."""
    session = session_of("s1", 1)
    async with JSONLStore(root) as store:
        store.attach_new(session)
        await store.detach(session)
    path = session_path(root, session.header)
    body = path.read_bytes().rstrip(b"\n").split(b"\n")
    body[-1] = body[-2]
    path.write_bytes(b"\n".join(body))
    return session, len(body) - 2
