"""A stored chunk's refusal names the field where the stored line holds it: under ``data.chunk`` (R11.2)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from retinue._content import OpaqueBlock, Text
from retinue._errors import CorruptSessionError
from retinue._stream import (
    STOP,
    BlockEnd,
    Errored,
    Finish,
    FinishReason,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from retinue.session import Session, load_event


def _stored(chunk: StreamChunk) -> dict[str, Any]:
    """The stored JSON record of a session's one chunk event, as ``Session.dump()`` gives it."""
    session = Session.create("s1")
    session.append_chunk(1, 1, chunk)
    [record] = json.loads(json.dumps(session.dump()))
    return record  # type: ignore[no-any-return]


def _at(record: dict[str, Any], path: str) -> Any:
    """The value at a refusal's path (``$.data.chunk.block.text``) in *record*."""
    value: Any = record
    for key in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path.removeprefix("$")):
        value = value[key[0]] if key[0] else value[int(key[1])]
    return value


def _refusal(record: dict[str, Any]) -> CorruptSessionError:
    with pytest.raises(CorruptSessionError) as caught:
        load_event(record, session_id="s1")
    return caught.value


_INT = "invalid value for type, expected int"


@pytest.mark.parametrize(
    ("chunk", "field", "wrong", "problem"),
    [
        (BlockEnd(0, Text("hi")), "block.text", 5, "invalid value for type, expected str"),
        (BlockEnd(0, Text("hi")), "index", "0", _INT),
        (TextDelta(0, "a"), "index", None, _INT),
        (UsageChunk(Usage(10, 5)), "usage.input_tokens", 1.5, _INT),
    ],
    ids=["block", "block-end-index", "text-delta-index", "usage"],
)
def test_a_wrong_field_inside_a_stored_chunk_is_named_at_its_stored_path(
    chunk: StreamChunk, field: str, wrong: object, problem: str
) -> None:
    """R11.2: the line nests the chunk under ``data.chunk``; the refusal names the path where
    the stored line holds the wrong value."""
    record = _stored(chunk)
    path = f"$.data.chunk.{field}"
    parent, _, name = path.rpartition(".")
    _at(record, parent)[name] = wrong
    message = str(_refusal(record))
    assert message == f"session 's1': event seq 0 is malformed: {problem} @ {path}"
    assert _at(record, message.rpartition(" @ ")[2]) == wrong


@pytest.mark.parametrize(
    ("reason", "field"),
    [(STOP, "kind"), (Errored("m"), "message")],
    ids=["stop", "error"],
)
def test_a_wrong_finish_reason_in_a_stored_chunk_is_named_under_chunk(
    reason: FinishReason, field: str
) -> None:
    """R11.2: a finish reason is a union, so the reason is named: at ``$.data.chunk.reason``."""
    record = _stored(Finish(reason))
    record["data"]["chunk"]["reason"][field] = 5
    message = str(_refusal(record))
    assert "invalid value for type" in message
    assert message.endswith(" @ $.data.chunk.reason")


def test_a_key_no_field_holds_inside_a_stored_chunks_finish_reason_is_named_under_chunk() -> None:
    """R11.2, R4.3: an unknown key in the finish reason is refused at ``$.data.chunk.reason``."""
    record = _stored(Finish(STOP))
    record["data"]["chunk"]["reason"]["colour"] = "red"
    refusal = _refusal(record)
    assert refusal.code == "UNKNOWN_FIELD"
    assert str(refusal).endswith("extra fields found (colour) @ $.data.chunk.reason")


@pytest.mark.parametrize(
    ("chunk", "place", "problem"),
    [
        (TextDelta(0, "a"), {"type": "no-such-chunk"}, "unknown stream chunk type 'no-such-chunk'"),
        (TextDelta(0, "a"), 5, "stream chunk must be an object with a string 'type'"),
    ],
    ids=["unknown-type", "not-an-object"],
)
def test_a_stored_chunk_refused_by_a_hand_written_hook_is_named_at_the_chunk(
    chunk: StreamChunk, place: object, problem: str
) -> None:
    """R11.2: a chunk its own hook refuses keeps its reason and is named at ``$.data.chunk``."""
    record = _stored(chunk)
    record["data"]["chunk"] = place
    message = str(_refusal(record))
    assert problem in message
    assert message.endswith(" @ $.data.chunk")


def test_an_opaque_block_in_a_stored_chunk_names_the_path_inside_the_block() -> None:
    """R11.2, R1.6: a NaN inside an unknown block's stored object is named from the block."""
    record = _stored(BlockEnd(0, OpaqueBlock("vendor", {"x": 1})))
    record["data"]["chunk"]["block"]["x"] = float("nan")
    assert str(_refusal(record)).endswith("x is a non-finite number (nan) @ $.data.chunk.block")


@pytest.mark.parametrize("field", ["turn", "step"])
def test_a_wrong_turn_or_step_of_a_stored_chunk_is_named(field: str) -> None:
    """R11.2: the chunk event's own fields are named too, as every other event's are."""
    record = _stored(TextDelta(0, "a"))
    record["data"][field] = "1"
    assert str(_refusal(record)).endswith(f"expected an integer, got '1' @ $.data.{field}")


@pytest.mark.parametrize(
    ("field", "wrong", "problem"),
    [
        ("index", True, "expected an integer, got True"),
        ("id", 7, "expected str, got 7"),
        ("arguments_delta", 5, "expected str, got 5"),
        ("arguments_delta", None, "expected str, got None"),
        ("name", ["x"], "expected str, got ['x']"),
    ],
    ids=["index", "id", "arguments", "arguments-null", "name"],
)
def test_a_wrong_field_of_a_stored_tool_call_delta_is_named_at_its_stored_path(
    field: str, wrong: object, problem: str
) -> None:
    """R11.2: a tool-call delta, read by a hook of its own, names the field at fault as every
    other chunk does, not only ``$.data.chunk``."""
    record = _stored(ToolCallDelta(0, "c", "{", name="look"))
    record["data"]["chunk"][field] = wrong
    message = str(_refusal(record))
    path = f"$.data.chunk.{field}"
    assert message == f"session 's1': event seq 0 is malformed: {problem} @ {path}"
    assert _at(record, path) == wrong


def test_a_stored_tool_call_delta_missing_its_arguments_is_refused_naming_them() -> None:
    """R11.2: the refusal names the key the line lacks, at the path it belongs."""
    record = _stored(ToolCallDelta(0, "c", "{"))
    del record["data"]["chunk"]["arguments_delta"]
    message = str(_refusal(record))
    assert message.endswith("'arguments_delta' missing @ $.data.chunk.arguments_delta")
