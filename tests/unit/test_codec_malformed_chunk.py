"""The event encoder never writes a chunk its loader would refuse (R4.5, R11.4)."""

from __future__ import annotations

import pytest

from retinue._content import Reasoning, Text, ToolCall
from retinue._errors import InvalidJsonError
from retinue._stream import (
    BlockEnd,
    BlockStart,
    Errored,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from retinue.session import Session
from retinue.session._codec import decode_event, encode_event

BAD: list[StreamChunk] = [
    TextDelta(True, "hi"),  # type: ignore[arg-type]
    TextDelta(0.0, "hi"),  # type: ignore[arg-type]
    TextDelta(0, 5),  # type: ignore[arg-type]
    BlockStart(False, "text"),  # type: ignore[arg-type]
    ToolCallDelta(True, "c", "{}"),  # type: ignore[arg-type]
    ReasoningDelta(1.5, "x"),  # type: ignore[arg-type]
    BlockEnd(True, Text("hi")),  # type: ignore[arg-type]
    UsageChunk({"input_tokens": 1}),  # type: ignore[arg-type]
    Finish(Errored(404)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("chunk", BAD)
def test_chunk_the_loader_would_refuse_is_refused_at_encode(chunk: StreamChunk) -> None:
    """A malformed chunk appended through the public API fails at encode, naming seq and field."""
    session = Session.create("s")
    seq = session.append_chunk(1, 1, chunk)
    with pytest.raises(InvalidJsonError) as caught:
        encode_event(session.events[seq])
    assert f"seq {seq}" in caught.value.message
    assert chunk.type in caught.value.message


def test_turn_that_is_not_an_int_is_refused_at_encode() -> None:
    session = Session.create("s")
    session.append_chunk(True, 1, TextDelta(0, "hi"))  # type: ignore[arg-type]
    with pytest.raises(InvalidJsonError, match="turn and step"):
        encode_event(session.events[0])


GOOD: list[StreamChunk] = [
    TextDelta(0, "hi"),
    TextDelta(10**6, "big index"),
    BlockStart(2, "reasoning"),
    ReasoningDelta(2, "x", signature="s"),
    ToolCallDelta(3, None, "{}"),
    ToolCallDelta(3, "c", "{", name="n"),
    BlockEnd(0, Text("hi")),
    BlockEnd(1, ToolCall("c", "n", "{}")),
    BlockEnd(2, Reasoning("x", "s")),
    UsageChunk(Usage(1, 2, cache_read_tokens=3)),
    Finish(Errored("boom", code="E")),
]


@pytest.mark.parametrize("chunk", GOOD)
def test_well_formed_chunk_round_trips(chunk: StreamChunk) -> None:
    session = Session.create("s")
    session.append_chunk(1, 1, chunk)
    event = session.events[0]
    assert decode_event(encode_event(event)) == event
