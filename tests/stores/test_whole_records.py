"""A stored record written whole that this version cannot read is refused wherever it lies,
never dropped as a torn write (R11.8); only a line that does not parse as a JSON object may be."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from retinue._errors import CorruptSessionError
from retinue.session import Session, TurnEnd
from tests.stores._kit import lines, open_tool_turn, run_turn
from tests.stores.conftest import StoreKit


async def _crashed(kit: StoreKit, session_id: str) -> Session:
    """Store a complete turn and a flushed open second one (acknowledged durable)."""
    session = Session.create(session_id)
    async with kit.open() as store:
        store.attach_new(session)
        run_turn(session, "one")
        open_tool_turn(session)
        await store.flush(session)
    return session


def _newer_chunk(record: dict[str, Any]) -> str:
    record["data"]["chunk"] = {"type": "citation-delta", "index": 0, "url": "u"}
    return "$.data.chunk"


def _string_turn(record: dict[str, Any]) -> str:
    record["data"]["turn"] = str(record["data"]["turn"])
    return "$.data.turn"


def _unknown_trigger(record: dict[str, Any]) -> str:
    record["data"]["trigger"]["kind"] = "webhook"
    return "$.data.trigger.kind"


# What to change in a record, and the record of the open turn to change: counted from the
# turn's first record (its turn/start), or from the end.
_EDITS: dict[str, tuple[Callable[[dict[str, Any]], str], int]] = {
    "a chunk of a newer kind": (_newer_chunk, 8),
    "a turn given as a string, last": (_string_turn, -1),
    "a trigger of an unknown kind": (_unknown_trigger, 0),
}


@pytest.mark.parametrize("edit", list(_EDITS))
async def test_store_load_refuses_a_whole_record_it_cannot_read_in_an_open_final_turn(
    record_kit: StoreKit, edit: str
) -> None:
    """R11.8: a record of the open final turn that parses whole as a JSON object, with its
    newline, was written whole (a crash cuts a record short): one this version cannot read
    fails the load naming the session, where the record lies and its field, and nothing is
    dropped or truncated, as it would be were it taken for a torn tail."""
    session = await _crashed(record_kit, "tail")
    change, at = _EDITS[edit]
    opened = 1 + max(event.seq for event in session.events if isinstance(event.data, TurnEnd))
    index = at % len(session.events) if at < 0 else opened + at
    record = json.loads(lines(session.events[:])[index])
    field = change(record)
    record_kit.tamper("tail", index, json.dumps(record, separators=(",", ":")))
    stored = record_kit.records("tail")
    async with record_kit.open() as store:
        for read in (store.load, store.inspect):
            with pytest.raises(CorruptSessionError) as caught:
                await read("tail")
            message = caught.value.message
            where = f"line {index + 2}: " if record_kit.kind == "jsonl" else f"event {index}"
            assert where in message
            assert "'tail'" in message
            assert f"@ {field}" in message
    assert record_kit.records("tail") == stored
