"""Store building blocks: ids and file names, the event line codec, failure handling."""

from __future__ import annotations

import contextlib
import gc
import json
import sqlite3
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from retinue._content import Text, ToolCall
from retinue._errors import CorruptSessionError, StoreError
from retinue._sources import MessageSource
from retinue._stream import BlockEnd, Errored, Finish, ReasoningDelta, TextDelta, ToolCallDelta
from retinue.session import (
    AssistantChunk,
    ContextMessage,
    CustomEvent,
    Event,
    Replace,
    Session,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    dump_event,
)
from retinue.session._codec import decode_event, encode_event
from retinue.stores import JSONLStore, MemoryStore, PostgresStore, SQLiteStore
from retinue.stores._backend import AppendBatch
from retinue.stores._common import parse_header
from retinue.stores._ids import bucket_name, check_session_id, escape_id, unescape_id
from retinue.stores._memory import MemoryBackend
from retinue.stores._sqlite import SQLiteBackend
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import FlakyBackend, lines, run_turn

texts = st.text(max_size=20)


@given(st.text(max_size=30))
def test_escape_id_is_injective_and_traversal_safe(session_id: str) -> None:
    """R11.12: escaped ids use only safe characters, never '.'/'..', and unescape back exactly."""
    name = escape_id(session_id)
    assert set(name) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-~")
    assert name not in {".", ".."}
    assert "/" not in name
    assert unescape_id(name) == session_id


def test_escape_id_examples() -> None:
    """R11.12: '~' and every non-kept UTF-16 unit become ~XXXX; '.' and '..' are escaped in full."""
    assert escape_id("agent-1.a_b") == "agent-1.a_b"
    assert escape_id("a~b c") == "a~007eb~0020c"
    assert escape_id("..") == "~002e~002e"
    assert escape_id("😀") == "~d83d~de00"


def test_bucket_name_hashes_the_cwd() -> None:
    """R11.12: the bucket is cwd-<12 hex of sha256(cwd)>, or _no-cwd."""
    assert bucket_name(None) == "_no-cwd"
    assert (
        bucket_name("/srv/app")
        == "cwd-" + __import__("hashlib").sha256(b"/srv/app").hexdigest()[:12]
    )


@pytest.mark.parametrize("good", ["agent-1", "ünïcode id", "a:b@c", "x" * 512])
def test_check_session_id_accepts_ordinary_ids(good: str) -> None:
    """Ids without separators or control characters are accepted as they are."""
    assert check_session_id(good) == good


def test_check_session_id_refuses_overlong_ids() -> None:
    """An id longer than 512 characters is refused with a typed error."""
    with pytest.raises(StoreError) as caught:
        check_session_id("x" * 513)
    assert caught.value.code == "INVALID_SESSION_ID"


@pytest.mark.parametrize(
    ("bad_id", "problem"),
    [
        ("tab\there", "the control character U+0009"),
        ("half\ud800", "the surrogate character U+D800"),
        ("new\u0378", "the unassigned character U+0378"),
    ],
)
def test_check_session_id_names_the_kind_of_character_it_refuses(bad_id: str, problem: str) -> None:
    """An id holding a control, surrogate or unassigned character is refused with a message saying
    which of the three it holds, not calling a surrogate or an unassigned character a control
    character."""
    with pytest.raises(StoreError) as caught:
        check_session_id(bad_id)
    assert caught.value.code == "INVALID_SESSION_ID"
    assert caught.value.message == f"session id {bad_id!r} contains {problem}"


def _event(data: object, **envelope: object) -> Event:
    return Event(seq=7, time=1_700_000_000_123, data=data, **envelope)  # type: ignore[arg-type]


@given(text=texts, other=texts)
def test_encode_event_equals_compact_json_of_dump_event(text: str, other: str) -> None:
    """The fast line encoder writes exactly the compact JSON of dump_event, and decodes back."""
    events = [
        _event(AssistantChunk(1, 2, TextDelta(0, text))),
        _event(AssistantChunk(1, 2, ToolCallDelta(1, None, text, None))),
        _event(AssistantChunk(1, 2, ToolCallDelta(1, other, text, "name"))),
        _event(AssistantChunk(1, 2, BlockEnd(0, ToolCall(text, other, "{}")))),
        _event(AssistantChunk(1, 2, ReasoningDelta(0, text, other))),
        _event(AssistantChunk(1, 2, Finish(Errored(text, other)))),
        _event(TurnStart(3, TurnTrigger("injection", MessageSource("plugin", other)))),
        _event(TurnEnd(3, TurnEndReason.error(2, text, other))),
        _event(
            ContextMessage((Text(text),), MessageSource("plugin", "p")),
            surface_op=Replace(1, 3),
            source_event_seqs=(1, 3),
        ),
        _event(CustomEvent("todo/write", {"todos": [{"content": text, "n": 1.5}]})),
    ]
    for event in events:
        line = encode_event(event)
        expected = json.dumps(dump_event(event), separators=(",", ":"), ensure_ascii=False)
        assert line == expected
        assert decode_event(line) == event


def test_encode_event_escapes_lone_surrogates() -> None:
    """A lone surrogate cannot be stored as UTF-8; the line falls back to \\u escapes."""
    event = _event(AssistantChunk(1, 1, TextDelta(0, "broken \ud800 pair")))
    line = encode_event(event)
    line.encode("utf-8")
    assert "\\ud800" in line
    assert decode_event(line) == event


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            '{"seq":1.9,"type":"step/start","time":5,"data":{"turn":2,"step":1}}',
            "expected an integer, got 1.9",
        ),
        (
            '{"seq":1,"type":"step/start","time":5,"data":{"turn":"2","step":1}}',
            "expected int @ $.data.turn",
        ),
        (
            (
                '{"seq":0,"type":"tool/result","time":5,"data":{"turn":1,"step":1,"call_id":7,'
                '"content":[{"type":"text","text":"x"}]}}'
            ),
            "expected str @ $.data.call_id",
        ),
        (
            (
                '{"seq":0,"type":"tool/result","time":5,"data":{"turn":1,"step":1,"call_id":"c",'
                '"content":[{"type":"text","text":"x"}],"is_error":"false"}}'
            ),
            "expected bool @ $.data.is_error",
        ),
        (
            (
                '{"seq":0,"type":"user/message","time":5,"data":{"content":[{"type":"text","text":12}]}'
                ',"surface_op":"append"}'
            ),
            "expected str @ $.data.content[0].text",
        ),
        (
            (
                '{"seq":0,"type":"assistant/chunk","time":5,"data":{"turn":1,"step":true,'
                '"chunk":{"type":"text-delta","index":0,"text":"a"}}}'
            ),
            "expected an integer, got True",
        ),
        ('{"seq":0,"type":5,"time":5,"data":{"a":1}}', "expected str, got 5"),
        (
            (
                '{"seq":0,"type":"assistant/chunk","time":5,"data":{"turn":1,"step":1,'
                '"chunk":{"type":"finish","reason":{"kind":5}}}}'
            ),
            "@ $.data.chunk.reason",
        ),
        (
            (
                '{"seq":0,"type":"assistant/chunk","time":5,"data":{"turn":1,"step":1,'
                '"chunk":{"type":"finish","reason":{"kind":"error","message":5}}}}'
            ),
            "@ $.data.chunk.reason",
        ),
    ],
)
def test_decode_event_refuses_a_row_with_a_wrong_field_type(line: str, problem: str) -> None:
    """R11.10, R1.6: a stored row is never coerced; the error names the seq and the field."""
    with pytest.raises(CorruptSessionError) as caught:
        decode_event(line, session_id="s1")
    assert str(caught.value).startswith("session 's1': event seq ")
    assert problem in str(caught.value)


_NOT_UTF8 = [
    b'{"seq":0,"type":"x/y","time":1,"data":{"a":"\xed\xa0\x80"}}',
    '{"seq":0,"type":"x/y","time":1,"data":{}}'.encode("utf-16"),
    '{"seq":0,"type":"x/y","time":1,"data":{}}'.encode("utf-8-sig"),
]


@pytest.mark.parametrize("line", _NOT_UTF8, ids=["encoded-surrogate", "utf-16", "bom"])
def test_decode_event_refuses_a_line_that_is_not_utf8(line: bytes) -> None:
    """R11.13: a stored line is UTF-8 JSON; other bytes are a corrupt record, never guessed at."""
    with pytest.raises(CorruptSessionError, match=r"'s1'.*UTF-8"):
        decode_event(line, session_id="s1")


@pytest.mark.parametrize(
    "header",
    [
        b'{"type":"session","id":"\xed\xa0\x80","created_at":1}',
        '{"type":"session","id":"h","created_at":1}'.encode("utf-16"),
        '{"type":"session","id":"h","created_at":1}'.encode("utf-8-sig"),
    ],
    ids=["encoded-surrogate", "utf-16", "bom"],
)
def test_parse_header_refuses_a_header_that_is_not_utf8(header: bytes) -> None:
    """R11.13: a stored header line is UTF-8 JSON; other bytes make a corrupt header."""
    with pytest.raises(CorruptSessionError, match=r"'h'.*UTF-8") as caught:
        parse_header(header, "h")
    assert caught.value.code == "CORRUPT_HEADER"


def test_sqlite_repair_refuses_a_kept_record_that_is_not_utf8(tmp_path: Path) -> None:
    """R11.8: cutting a torn tail off a segment whose kept records are not UTF-8 is a typed
    refusal of that batch, not an untyped failure of the group."""
    backend = SQLiteBackend(tmp_path / "sessions.db")
    backend.open()
    session = Session.create("sur")
    run_turn(session)
    events = tuple(session.events)
    assert backend.write([AppendBatch("sur", 0, events, header=session.header)]) == [None]
    with contextlib.closing(sqlite3.connect(tmp_path / "sessions.db")) as conn, conn:
        conn.execute("UPDATE segments SET body = ?", (b"\xed\xa0\x80\n" * len(events),))
    [error] = backend.write([AppendBatch("sur", 3, (), truncate_to=3)])
    backend.close()
    assert isinstance(error, StoreError)
    assert error.code == "CORRUPT_SESSION"
    assert "'sur'" in error.message
    assert "UTF-8" in error.message


async def test_sqlite_store_refuses_another_database_before_changing_it(tmp_path: Path) -> None:
    """A database without the retinue schema is refused as it was: still in its own journal
    mode (not switched to WAL for good) and without retinue tables."""
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (text)")
        conn.commit()
    with pytest.raises(StoreError, match="without a retinue schema") as caught:
        async with SQLiteStore(path):
            pass
    assert caught.value.code == "UNSUPPORTED_SCHEMA"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]


async def test_sqlite_store_without_create_reads_a_store_and_creates_none(tmp_path: Path) -> None:
    """``create=False`` reads an existing store (still WAL), but neither makes a missing file
    nor gives an empty one a schema."""
    path = tmp_path / "sessions.db"
    session = Session.create("kept")
    run_turn(session)
    async with SQLiteStore(path) as store:
        store.attach_new(session)
    async with SQLiteStore(path, create=False) as store:
        assert lines((await store.inspect("kept")).events[:]) == lines(session.events[:])
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    for missing in (tmp_path / "missing.db", tmp_path / "empty.db"):
        if missing.name == "empty.db":
            missing.touch()
        with pytest.raises(StoreError):
            async with SQLiteStore(missing, create=False):
                pass
    assert not (tmp_path / "missing.db").exists()
    assert (tmp_path / "empty.db").stat().st_size == 0


async def _sqlite_with_three_segments(path: Path) -> Session:
    session = Session.create("segmented")
    async with SQLiteStore(path) as store:
        store.attach_new(session)
        for number in range(3):
            run_turn(session, f"message {number}")
            await store.flush(session)
        await store.detach(session)
    return session


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (
            "DELETE FROM segments WHERE first_seq = (SELECT max(first_seq) FROM segments)",
            "{b}..{c}",
        ),
        ("DELETE FROM segments WHERE first_seq = (SELECT min(first_seq) FROM segments)", "0..{a}"),
        ("UPDATE segments SET count = count + 1 WHERE first_seq = 0", "segment from seq 0"),
        (
            "UPDATE segments SET count = count - 1 WHERE first_seq = 0",
            "segment from seq 0",
        ),
        ("UPDATE sessions SET next_seq = next_seq + 2", "{d}..{e}"),
    ],
    ids=["last-segment", "first-segment", "count", "count-below-its-records", "next-seq"],
)
async def test_sqlite_load_refuses_a_log_that_lost_committed_events(
    tmp_path: Path, damage: str, problem: str
) -> None:
    """R11.8: the segments must hold every committed seq (``next_seq``, each ``count``, which is
    the records its segment holds, neither more nor fewer); a lost segment makes the load fail
    naming the missing seqs instead of dropping committed events."""
    path = tmp_path / "sessions.db"
    session = await _sqlite_with_three_segments(path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        firsts = [row[0] for row in conn.execute("SELECT first_seq FROM segments ORDER BY 1")]
        conn.execute(damage)
    total = len(session.events)
    where = problem.format(a=firsts[1] - 1, b=firsts[2], c=total - 1, d=total, e=total + 1)
    async with SQLiteStore(path) as store:
        with pytest.raises(CorruptSessionError, match=r"'segmented'.*seq gap") as caught:
            await store.load("segmented")
    assert where in caught.value.message


def test_decode_event_keeps_an_integer_in_a_number_field() -> None:
    """R1.6: a whole number stored where a float may be is written back unchanged."""
    line = (
        '{"seq":0,"type":"request/header","time":5,"data":{"header":{"config":'
        '{"model":"m","temperature":1}},"reason":"initial"}}'
    )
    assert encode_event(decode_event(line)) == line


async def test_store_failed_write_keeps_the_buffer_and_does_not_poison() -> None:
    """R11.5, R11.6: a failed commit raises naming the session, keeps its events, and the next flush succeeds."""
    backend = FlakyBackend()
    async with BufferedStore(backend, name="flaky") as store:  # type: ignore[arg-type]
        session = Session.create("flaky-1")
        store.attach_new(session)
        run_turn(session)
        backend.fail_next = True
        with pytest.raises(StoreError, match=r"flaky-1.*No space left") as caught:
            await store.flush(session)
        assert caught.value.code == "STORAGE_ERROR"
        assert store.statistics().buffered_events == len(session.events)
        run_turn(session)
        await store.flush(session)
        assert store.statistics().buffered_events == 0
        await store.detach(session)
        loaded = await store.load("flaky-1")
    assert lines(loaded.events[:]) == lines(session.events[:])


async def test_store_flush_without_async_with_commits_directly() -> None:
    """A store used without ``async with`` still makes each flush durable on return."""
    store = BufferedStore(MemoryBackend(), name="plain")
    session = Session.create("plain-1")
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    assert store.statistics().committed_events == len(session.events)
    await store.aclose()
    with pytest.raises(StoreError) as caught:
        store.attach_new(Session.create("late"))
    assert caught.value.code == "STORE_CLOSED"


async def test_store_flush_nowait_commits_an_in_memory_buffer_without_yielding() -> None:
    """R11.4: an in-memory store commits synchronously; a failed commit raises and keeps the buffer."""
    backend = FlakyBackend()
    async with BufferedStore(backend, name="flaky") as store:  # type: ignore[arg-type]
        session = Session.create("nowait-1")
        store.attach_new(session)
        run_turn(session)
        backend.fail_next = True
        with pytest.raises(StoreError, match=r"nowait-1.*No space left"):
            store.flush_nowait(session)
        assert store.statistics().buffered_events == len(session.events)
        assert store.flush_nowait(session)
        assert store.statistics().buffered_events == 0
        assert store.flush_nowait(session)  # nothing left: still done
        await store.detach(session)
        loaded = await store.load("nowait-1")
    assert lines(loaded.events[:]) == lines(session.events[:])


async def test_store_flush_nowait_leaves_a_blocking_backend_to_flush(tmp_path: Path) -> None:
    """A store whose backend blocks commits nothing synchronously: flush does it."""
    async with SQLiteStore(tmp_path / "sessions.db") as store:
        session = Session.create("blocking-1")
        store.attach_new(session)
        run_turn(session)
        assert not store.flush_nowait(session)
        assert store.statistics().buffered_events == len(session.events)
        await store.flush(session)
        assert store.statistics().buffered_events == 0


def test_store_classes_say_whether_they_are_durable(tmp_path: Path) -> None:
    """Only ``MemoryStore`` is not durable; constructing a store opens nothing."""
    assert not MemoryStore().durable
    assert SQLiteStore(tmp_path / "sessions.db").durable
    assert JSONLStore(tmp_path / "sessions").durable
    assert PostgresStore("postgresql://nowhere.invalid/db").durable
    assert list(tmp_path.iterdir()) == []


def test_repair_records_missing_tool_calls_before_their_results() -> None:
    """R11.9, R4.15: a call that never got its tool/call record gets one before its synthetic result."""
    from retinue.session import (
        AssistantMessage,
        StepStart,
        ToolCallEvent,
        ToolResultEvent,
        UserMessage,
    )
    from retinue.stores import repair_tail
    from retinue.testing import check_history_replay, check_session_invariants

    session = Session.create("repair")
    run_turn(session)
    turn = session.next_turn_number()
    session.append(TurnStart(turn, TurnTrigger("message")))
    session.append(UserMessage((Text("two calls"),)), surface="append")
    session.append(StepStart(turn, 1))
    first, second = ToolCall("c-1", "lookup", '{"city":"Oslo"}'), ToolCall("c-2", "lookup", "{}")
    session.append(AssistantMessage(turn, 1, (first, second)), surface="append")
    started = session.append(ToolCallEvent(turn, 1, "c-1", "lookup", first.arguments))
    closers = repair_tail(session.events)
    assert [event.type for event in closers] == [
        "tool/result",
        "tool/call",
        "tool/result",
        "step/end",
        "turn/end",
    ]
    assert closers[0].source_event_seqs == (started.seq,)
    record = closers[1].data
    assert isinstance(record, ToolCallEvent)
    assert (record.call_id, record.name, record.arguments) == ("c-2", "lookup", "{}")
    assert closers[2].source_event_seqs == (closers[1].seq,)
    assert all(isinstance(closers[i].data, ToolResultEvent) for i in (0, 2))
    repaired = [*session.events, *closers]
    check_session_invariants(repaired)
    check_history_replay(repaired)


def test_repair_reads_only_the_open_turn_however_long_the_session() -> None:
    """R11.9: the closers of an open turn after 1 or 300 closed ones are the same, and finding
    them calls as many functions: a restart after a crash, or a load, of a long session does
    not fold every turn before the open one again."""
    from retinue.stores import repair_tail

    def closers_and_calls(closed_turns: int) -> tuple[list[str], int]:
        session = Session.create("long")
        for _ in range(closed_turns):
            run_turn(session)
        session.append(TurnStart(session.next_turn_number(), TurnTrigger("message")))
        count = 0

        def profile(frame: object, event: str, arg: object) -> None:
            nonlocal count
            count += event in ("call", "c_call")

        # A collection would run the finalizers of earlier tests' garbage inside the count.
        gc.collect()
        gc.disable()
        profiling = sys.getprofile()
        sys.setprofile(profile)
        try:
            closers = repair_tail(session.events)
        finally:
            sys.setprofile(profiling)
            gc.enable()
        return [event.type for event in closers], count

    short, long = closers_and_calls(1), closers_and_calls(300)
    assert short[0] == long[0] == ["turn/end"]
    assert long[1] <= short[1] + 10, (short, long)


def test_a_backend_that_is_not_durable_must_not_block() -> None:
    """The loop flushes a store that is not durable without a shield, so it must never block."""

    class SlowMemory:
        durable = False
        blocking = True

    with pytest.raises(TypeError, match="not durable must not be blocking"):
        BufferedStore(SlowMemory(), name="SlowMemory")  # type: ignore[arg-type]


class _UnopenableBackend:
    """A blocking backend whose storage cannot be opened."""

    blocking = True
    durable = True

    def __init__(self) -> None:
        self.inner = MemoryBackend()

    def open(self) -> None:
        raise OSError(13, "Permission denied")

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


async def test_store_flush_names_the_session_when_the_store_cannot_open_or_is_closed() -> None:
    """R11.5: a flush failing before its write still raises naming the session, code kept."""
    store = BufferedStore(_UnopenableBackend(), name="unopenable")  # type: ignore[arg-type]
    session = Session.create("agent-42")
    store.attach_new(session)
    run_turn(session)
    with pytest.raises(StoreError, match=r"agent-42.*Permission denied") as caught:
        await store.flush(session)
    assert caught.value.code == "STORAGE_ERROR"
    with pytest.raises(StoreError):
        await store.aclose()
    with pytest.raises(StoreError, match="agent-42") as closed:
        await store.flush(session)
    assert closed.value.code == "STORE_CLOSED"
