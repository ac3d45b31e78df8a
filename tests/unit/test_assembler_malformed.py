"""BlockAssembler refuses a chunk whose fields its stored line could not hold (MALFORMED_CHUNK)."""

from __future__ import annotations

import pytest

from retinue._content import Reasoning, Text, ToolCall
from retinue._stream import (
    STOP,
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
from retinue.loop._assembler import BlockAssembler, BlockAssemblyError

MALFORMED: list[tuple[StreamChunk, str]] = [
    (TextDelta(True, "hi"), "text-delta.index"),  # type: ignore[arg-type]
    (TextDelta(0.0, "hi"), "text-delta.index"),  # type: ignore[arg-type]
    (TextDelta(None, "hi"), "text-delta.index"),  # type: ignore[arg-type]
    (TextDelta(0, 5), "text-delta.text"),  # type: ignore[arg-type]
    (BlockStart(False, "text"), "block-start.index"),  # type: ignore[arg-type]
    (BlockStart(0, None), "block-start.block_type"),  # type: ignore[arg-type]
    (ReasoningDelta(0, "x", signature=1), "reasoning-delta.signature"),  # type: ignore[arg-type]
    (ReasoningDelta(0.0, "x"), "reasoning-delta.index"),  # type: ignore[arg-type]
    (ReasoningDelta(0, 5), "reasoning-delta.text"),  # type: ignore[arg-type]
    (ToolCallDelta(0, 7, "{}"), "tool-call-delta.id"),  # type: ignore[arg-type]
    (ToolCallDelta(0, "c", "{}", name=b"n"), "tool-call-delta.name"),  # type: ignore[arg-type]
    (ToolCallDelta(1.0, "c", "{}"), "tool-call-delta.index"),  # type: ignore[arg-type]
    (ToolCallDelta(0, "c", {"a": 1}), "tool-call-delta.arguments_delta"),  # type: ignore[arg-type]
    (BlockEnd(0, "hi"), "block-end.block"),  # type: ignore[arg-type]
    (BlockEnd(True, Text("hi")), "block-end.index"),  # type: ignore[arg-type]
    (UsageChunk({"input_tokens": 1}), "usage.usage"),  # type: ignore[arg-type]
    (Finish(Errored(404)), "finish.reason.message"),  # type: ignore[arg-type]
    (Finish("stop"), "finish.reason"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("chunk", "field"), MALFORMED)
def test_malformed_chunk_is_refused_naming_type_and_field(chunk: StreamChunk, field: str) -> None:
    """R4.5, R10.2: a field of the wrong type is a typed model error naming the chunk and field."""
    with pytest.raises(BlockAssemblyError) as caught:
        BlockAssembler().feed(chunk)
    assert caught.value.code == "MALFORMED_CHUNK"
    assert chunk.type in caught.value.message
    assert f"{field} " in caught.value.message


@pytest.mark.parametrize("index", [False, 0.0])
def test_delta_equal_to_the_open_text_index_is_still_checked(index: object) -> None:
    """A bool or float equal to the open block's index does not ride the appending fast path."""
    assembler = BlockAssembler()
    assembler.feed(TextDelta(0, "a"))
    with pytest.raises(BlockAssemblyError) as caught:
        assembler.feed(TextDelta(index, "b"))  # type: ignore[arg-type]
    assert caught.value.code == "MALFORMED_CHUNK"
    assert assembler.message().content == (Text("a"),)


def test_text_that_is_not_a_string_is_refused_on_the_fast_path() -> None:
    assembler = BlockAssembler()
    assembler.feed(TextDelta(0, "a"))
    with pytest.raises(BlockAssemblyError, match=r"text-delta\.text"):
        assembler.feed(TextDelta(0, ["b"]))  # type: ignore[arg-type]


def test_well_formed_chunks_of_every_kind_still_assemble() -> None:
    """Large indices, str subclasses, optional fields and other blocks pass the full check."""

    class Label(str):
        __slots__ = ()

    assembler = BlockAssembler()
    for chunk in (
        BlockStart(1000, "text"),
        TextDelta(1000, "a"),
        TextDelta(1000, Label("b")),
        TextDelta(1000, "c"),
        ReasoningDelta(3, "think", signature="sig"),
        BlockEnd(3, Reasoning("think", "sig")),
        ToolCallDelta(4, "call-1", '{"a":', name="echo"),
        ToolCallDelta(4, None, "1}"),
        UsageChunk(Usage(1, 2)),
        Finish(Errored("boom", code="E")),
        Finish(STOP),
    ):
        assembler.feed(chunk)
    assert assembler.message().content == (
        Text("abc"),
        Reasoning("think", "sig"),
        ToolCall("call-1", "echo", '{"a":1}'),
    )
