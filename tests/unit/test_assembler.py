"""BlockAssembler: the R10.6 fold of stream chunks into an assistant message."""

from __future__ import annotations

import pytest

from retinue._content import OpaqueBlock, Reasoning, RedactedReasoning, Text, ToolCall
from retinue._errors import ModelError
from retinue._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
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


def assemble(*chunks: StreamChunk) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


def test_assembler_empty_stream_is_empty_assistant_message_with_stop() -> None:
    """R10.6: no chunks give an empty assistant message, finish stop and no usage."""
    assembler = assemble()
    assert assembler.message().role == "assistant"
    assert assembler.message().content == ()
    assert assembler.finish == STOP
    assert assembler.usage is None


def test_assembler_text_deltas_append_in_order() -> None:
    """R10.6: text deltas append to their block's partial."""
    assembler = assemble(
        BlockStart(0, "text"), TextDelta(0, "Hel"), TextDelta(0, "lo"), TextDelta(0, "!")
    )
    assert assembler.message().content == (Text("Hello!"),)


def test_assembler_blocks_ordered_by_first_appearance_of_index() -> None:
    """R10.6: blocks are ordered by the first appearance of their index, not by index value."""
    assembler = assemble(
        TextDelta(5, "first"),
        BlockStart(2, "reasoning"),
        ToolCallDelta(0, "c", "{}", name="t"),
        ReasoningDelta(2, "second"),
        TextDelta(5, " more"),
    )
    assert assembler.message().content == (
        Text("first more"),
        Reasoning("second"),
        ToolCall("c", "t", "{}"),
    )


def test_assembler_block_end_of_unseen_index_counts_as_first_appearance() -> None:
    """R10.6: a close for a new index registers it at that position."""
    assembler = assemble(BlockEnd(3, Text("a")), TextDelta(1, "b"))
    assert assembler.message().content == (Text("a"), Text("b"))


def test_assembler_repeated_block_start_is_ignored() -> None:
    """R10.6: a second block-start for an index neither resets nor retypes it."""
    assembler = assemble(
        BlockStart(0, "text"),
        TextDelta(0, "kept"),
        BlockStart(0, "text"),
        BlockStart(0, "tool-call"),
        TextDelta(0, "!"),
    )
    assert assembler.message().content == (Text("kept!"),)


def test_assembler_delta_without_start_creates_the_partial() -> None:
    """R10.6: delta-only protocols are allowed; the delta creates its block."""
    assembler = assemble(TextDelta(0, "a"), ReasoningDelta(1, "r"), ToolCallDelta(2, "x", "{"))
    assert assembler.message().content == (Text("a"), Reasoning("r"), ToolCall("x", "", "{"))


def test_assembler_tool_call_delta_latest_id_wins_and_arguments_append() -> None:
    """R10.6: tool-call deltas set the id (latest wins) and append the arguments."""
    assembler = assemble(
        BlockStart(0, "tool-call"),
        ToolCallDelta(0, "first", '{"a"', name="lookup"),
        ToolCallDelta(0, None, ": 1"),
        ToolCallDelta(0, "second", "}"),
    )
    assert assembler.message().content == (ToolCall("second", "lookup", '{"a": 1}'),)


def test_assembler_tool_call_name_set_only_when_given() -> None:
    """R10.6: a delta without a name keeps the earlier name; a later name replaces it."""
    kept = assemble(ToolCallDelta(0, "c", "", name="one"), ToolCallDelta(0, None, "{}"))
    assert kept.message().content == (ToolCall("c", "one", "{}"),)
    renamed = assemble(
        ToolCallDelta(0, "c", "", name="one"), ToolCallDelta(0, None, "", name="two")
    )
    assert renamed.message().content == (ToolCall("c", "two", ""),)


def test_assembler_unclosed_tool_call_without_id_gets_call_index_and_empty_name() -> None:
    """R10.6: an unclosed tool call without id is ``call-<index>`` with name ``''``."""
    assembler = assemble(BlockStart(7, "tool-call"), ToolCallDelta(7, None, '{"q": 1'))
    assert assembler.message().content == (ToolCall("call-7", "", '{"q": 1'),)


def test_assembler_block_end_is_authoritative_over_the_partial() -> None:
    """R10.6: block-end carries the assembled block, which replaces the partial."""
    assembler = assemble(
        BlockStart(0, "tool-call"),
        ToolCallDelta(0, "id-1", "garbage", name="t"),
        BlockEnd(0, ToolCall("id-1", "t", '{"ok": true}')),
    )
    assert assembler.message().content == (ToolCall("id-1", "t", '{"ok": true}'),)


def test_assembler_first_block_end_wins_and_freezes_the_block() -> None:
    """R10.6: a second close and later deltas for a closed index are ignored."""
    assembler = assemble(
        TextDelta(0, "draft"),
        BlockEnd(0, Text("final")),
        TextDelta(0, " ignored"),
        BlockEnd(0, Text("second close")),
        ToolCallDelta(0, "x", "ignored too"),
        ReasoningDelta(0, "and this"),
    )
    assert assembler.message().content == (Text("final"),)


def test_assembler_reasoning_signature_fragments_accumulate() -> None:
    """R10.6: reasoning deltas append text; signature fragments join into the signature."""
    assembler = assemble(
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "think "),
        ReasoningDelta(0, "", signature="sig-"),
        ReasoningDelta(0, "hard", signature="abc"),
    )
    assert assembler.message().content == (Reasoning("think hard", "sig-abc"),)


def test_assembler_reasoning_without_signature_has_none() -> None:
    """R10.6: reasoning that never received a signature fragment has ``signature=None``."""
    assert assemble(ReasoningDelta(0, "r")).message().content == (Reasoning("r", None),)


def test_assembler_usage_and_finish_last_value_wins() -> None:
    """R10.6: usage and finish keep the last value fed."""
    assembler = assemble(
        UsageChunk(Usage(1, 1)),
        Finish(TOOL_CALLS),
        UsageChunk(Usage(10, 20)),
        Finish(MAX_TOKENS),
    )
    assert assembler.usage == Usage(10, 20)
    assert assembler.finish == MAX_TOKENS


@pytest.mark.parametrize("reason", [ABORTED, Errored("boom", "E1"), STOP])
def test_assembler_finish_reports_the_fed_reason(reason: Errored) -> None:
    """R10.6: the finish chunk's reason is reported as is."""
    assert assemble(TextDelta(0, "x"), Finish(reason)).finish == reason


def test_assembler_unclosed_block_of_unknown_type_raises_value_error() -> None:
    """R10.6: an unclosed block whose type the assembler cannot build raises."""
    assembler = assemble(BlockStart(0, "text"), TextDelta(0, "ok"), BlockStart(1, "image"))
    with pytest.raises(ValueError, match="image"):
        assembler.message()
    with pytest.raises(BlockAssemblyError) as caught:
        assembler.message()
    assert isinstance(caught.value, ModelError)
    assert caught.value.code == "INVALID_STREAM"


def test_assembler_closed_block_of_unknown_type_passes_through() -> None:
    """R1.1, R10.6: a closed block of any kind is kept untouched."""
    opaque = OpaqueBlock("image", {"url": "u"})
    assembler = assemble(
        BlockStart(0, "redacted-reasoning"),
        BlockEnd(0, RedactedReasoning("xyz")),
        BlockStart(1, "image"),
        BlockEnd(1, opaque),
    )
    assert assembler.message().content == (RedactedReasoning("xyz"), opaque)


def test_assembler_empty_started_blocks_build_empty_values() -> None:
    """R10.6: a started block with no deltas builds from its empty partial."""
    assembler = assemble(BlockStart(0, "text"), BlockStart(1, "reasoning"))
    assert assembler.message().content == (Text(""), Reasoning(""))


def test_assembler_delta_of_another_kind_for_an_open_block_raises() -> None:
    """R10.6: a text delta for an open tool-call block is a protocol violation."""
    assembler = assemble(BlockStart(0, "tool-call"))
    with pytest.raises(BlockAssemblyError, match="text-delta"):
        assembler.feed(TextDelta(0, "x"))


def test_assembler_feed_rejects_non_chunks() -> None:
    """Feeding something that is not a stream chunk raises ``TypeError``."""
    with pytest.raises(TypeError):
        BlockAssembler().feed(Text("x"))  # type: ignore[arg-type]


def test_assembler_message_is_repeatable_and_counts_chunks() -> None:
    """``message()`` does not consume state; ``chunks`` counts every chunk fed."""
    assembler = assemble(TextDelta(0, "a"), TextDelta(0, "b"), Finish(STOP))
    assert assembler.message() == assembler.message()
    assert assembler.chunks == 3
