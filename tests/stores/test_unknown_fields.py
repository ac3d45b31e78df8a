"""A stored event with a key no field holds is refused, never silently dropped (R4.3, R11.2, R11.8)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from retinue._errors import CorruptSessionError
from retinue.session import Session, TurnEnd, UserMessage
from retinue.session._codec import decode_event
from tests.stores._kit import lines, open_tool_turn, run_turn
from tests.stores.conftest import StoreKit


def _with_extra_key(line: str, key: str) -> str:
    """*line* with ``colour`` added to the record at *key* (a dotted path)."""
    record = json.loads(line)
    target = record
    for part in filter(None, key.split(".")):
        target = target[int(part)] if isinstance(target, list) else target[part]
    target["colour"] = "red"
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


async def _stored(kit: StoreKit, session_id: str, *, open_turn: bool = False) -> Session:
    """Store two complete turns (and a flushed open third one, if asked); return the session."""
    session = Session.create(session_id)
    async with kit.open() as store:
        store.attach_new(session)
        run_turn(session, "one")
        run_turn(session, "two")
        if open_turn:
            open_tool_turn(session)
        await store.detach(session)
    return session


def _place(kit: StoreKit, index: int) -> str:
    """How a refusal names stored record *index* after the session: a JSONL store names its
    file and line before the session instead."""
    return "" if kit.kind == "jsonl" else f"event {index}: "


def _seq_of(session: Session, kind: type[object]) -> int:
    return next(event.seq for event in session.events if isinstance(event.data, kind))


def _chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq": 4,
        "type": "assistant/chunk",
        "time": 5,
        "data": {"turn": 1, "step": 1, "chunk": chunk},
    }


_TEXT = {"type": "text", "text": "x"}
_USER = {"seq": 4, "type": "user/message", "time": 5, "surface_op": "append"}


@pytest.mark.parametrize(
    ("record", "key", "path"),
    [
        ({"seq": 4, "type": "step/start", "time": 5, "data": {"turn": 2, "step": 1}}, "", "$"),
        (
            {"seq": 4, "type": "step/start", "time": 5, "data": {"turn": 2, "step": 1}},
            "data",
            "$.data",
        ),
        (
            {
                "seq": 4,
                "type": "turn/end",
                "time": 5,
                "data": {"turn": 2, "reason": {"kind": "completed"}},
            },
            "data.reason",
            "$.data.reason",
        ),
        (_USER | {"data": {"content": [_TEXT]}}, "data.content.0", "$.data.content[0]"),
        (
            _USER | {"data": {"content": [], "source": {"kind": "user"}}},
            "data.source",
            "$.data.source",
        ),
        (
            _USER
            | {"data": {"content": []}, "surface_op": {"op": "replace", "start": 1, "end": 2}},
            "surface_op",
            "$.surface_op",
        ),
        (_chunk({"type": "text-delta", "index": 0, "text": "a"}), "data", "$.data"),
        (_chunk({"type": "text-delta", "index": 0, "text": "a"}), "data.chunk", "$.data.chunk"),
        (
            _chunk({"type": "tool-call-delta", "index": 0, "arguments_delta": "{"}),
            "data.chunk",
            "$.data.chunk",
        ),
        (
            _chunk({"type": "finish", "reason": {"kind": "stop"}}),
            "data.chunk.reason",
            "$.data.chunk.reason",
        ),
        (
            _chunk({"type": "finish", "reason": {"kind": "error", "message": "m"}}),
            "data.chunk.reason",
            "$.data.chunk.reason",
        ),
    ],
)
def test_decode_event_refuses_a_key_no_field_holds(
    record: dict[str, Any], key: str, path: str
) -> None:
    """R4.3, R11.2: the stored format is closed and versioned, so a key no field of its record
    holds cannot be kept; the error names the session, the seq, the key and where it is."""
    line = json.dumps(record)
    assert decode_event(line), "well-formed without the extra key"
    with pytest.raises(CorruptSessionError) as caught:
        decode_event(_with_extra_key(line, key), session_id="s1")
    assert caught.value.code == "UNKNOWN_FIELD"
    assert str(caught.value) == (
        f"session 's1': event seq 4 is malformed: extra fields found (colour) @ {path}"
    )


@pytest.mark.parametrize(
    "record",
    [
        {"seq": 0, "type": "plugin/note", "time": 5, "data": {"anything": {"colour": 1}}},
        _USER
        | {
            "data": {"content": [{"colour": 1, "type": "future-block"}], "source": {"kind": "user"}}
        },
        {
            "seq": 0,
            "type": "tool/result",
            "time": 5,
            "data": {
                "turn": 1,
                "step": 1,
                "call_id": "c",
                "content": [],
                "is_error": False,
                "meta": {"colour": 1},
            },
            "surface_op": "append",
        },
    ],
    ids=["custom event", "unknown block", "meta"],
)
def test_decode_event_keeps_every_key_of_the_open_parts(record: dict[str, Any]) -> None:
    """R4.11, R11.2: unknown event types, unknown content blocks and JSON payloads keep every key."""
    assert json.loads(lines([decode_event(json.dumps(record))])[0]) == record


async def test_store_load_refuses_an_unknown_field_in_the_committed_region(
    record_kit: StoreKit,
) -> None:
    """R11.2, R11.8: a committed event with a key no field holds makes the load fail naming the
    session, the seq and the key; the record is left as stored, nothing truncated."""
    session = await _stored(record_kit, "coloured")
    seq = _seq_of(session, UserMessage)
    tampered = _with_extra_key(lines(session.events[:])[seq], "data.source")
    record_kit.tamper("coloured", seq, tampered)
    async with record_kit.open() as store:
        for read in (store.load, store.inspect):
            with pytest.raises(CorruptSessionError) as caught:
                await read("coloured")
            assert caught.value.code == "UNKNOWN_FIELD"
            assert f"'coloured': {_place(record_kit, seq)}event seq {seq} " in str(caught.value)
            assert "(colour) @ $.data.source" in str(caught.value)
    assert record_kit.record_count("coloured") == len(session.events)


@pytest.mark.parametrize("where", ["", "data"], ids=["envelope", "data"])
async def test_store_load_never_discards_a_whole_record_with_an_unknown_field_as_torn(
    record_kit: StoreKit, where: str
) -> None:
    """R11.8: a crash cuts a record short and never adds a key, so a final record of an open
    turn with a key no field holds is refused, not dropped and truncated as a torn write."""
    await _refused_with_its_colour(record_kit, where, torn_before=False)


async def test_store_load_never_discards_a_whole_record_with_an_unknown_field_after_a_torn_one(
    tearing_kit: StoreKit,
) -> None:
    """R11.8: in a store whose writes can tear, a whole final record with a key no field holds
    is refused even after an unparsable record that would start a torn tail."""
    await _refused_with_its_colour(tearing_kit, "data", torn_before=True)


async def _refused_with_its_colour(kit: StoreKit, where: str, *, torn_before: bool) -> None:
    """Give the last record of an open turn a ``colour`` key; its load fails naming it."""
    session = await _stored(kit, "tail", open_turn=True)
    last = len(session.events) - 1
    assert last - 1 > _seq_of(session, TurnEnd), "both records are in the open final turn"
    kit.tamper("tail", last, _with_extra_key(lines(session.events[:])[last], where))
    if torn_before:
        kit.tamper("tail", last - 1, '{"seq": 0, "type": "assistant/mes')
    async with kit.open() as store:
        with pytest.raises(
            CorruptSessionError, match=rf"'tail': {_place(kit, last)}event seq {last} .*colour"
        ) as caught:
            await store.load("tail")
    assert caught.value.code == "UNKNOWN_FIELD"
    assert kit.record_count("tail") == len(session.events)


async def test_store_load_never_discards_a_whole_record_holding_an_integer_too_long_to_read(
    record_kit: StoreKit,
) -> None:
    """R11.8: a record that parses whole but holds an integer longer than this process reads (its
    digit limit set lower than the writer's) was written whole: the load is refused naming it, and
    nothing is dropped: the record is no torn tail, to be dropped with every record after it and the
    file truncated."""
    session = Session.create("wide")
    async with record_kit.open() as store:
        store.attach_new(session)
        run_turn(session, "one")
        open_tool_turn(session)
        session.append_custom("plugin/counter", {"value": 10**1000})
        session.append_custom("plugin/note", {"text": "after"})
        await store.detach(session)
    seq = len(session.events) - 2
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        async with record_kit.open() as store:
            with pytest.raises(CorruptSessionError) as caught:
                await store.load("wide")
    finally:
        sys.set_int_max_str_digits(limit)
    assert caught.value.code == "INTEGER_TOO_LONG"
    assert str(caught.value).endswith(
        f"session 'wide': {_place(record_kit, seq)}event seq {seq} is malformed: "
        "an integer of more than 640 digits @ $.data.value"
    )
    assert record_kit.record_count("wide") == len(session.events)
    async with record_kit.open() as store:
        loaded = await store.load("wide")
    assert lines(loaded.events[: len(session.events)]) == lines(session.events[:])


async def test_store_load_names_where_a_record_with_an_unknown_field_lies(
    record_kit: StoreKit,
) -> None:
    """R11.8: the refusal of a stored record with a key no field holds names where it lies (its
    file and line, or in a store without files its event index), even when the record names no
    seq of its own; the session is named once."""
    session = await _stored(record_kit, "coloured")
    seq = _seq_of(session, UserMessage)
    record = json.loads(_with_extra_key(lines(session.events[:])[seq], ""))
    del record["seq"]
    record_kit.tamper("coloured", seq, json.dumps(record))
    async with record_kit.open() as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("coloured")
    assert caught.value.code == "UNKNOWN_FIELD"
    where = f"line {seq + 2}" if record_kit.kind == "jsonl" else f"event {seq}"
    assert f"{where}: " in caught.value.message
    assert caught.value.message.count("'coloured'") == 1
    assert caught.value.message.endswith("extra fields found (colour) @ $")
