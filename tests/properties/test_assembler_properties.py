"""Properties of BlockAssembler (R10.6) over generated messages and chunkings."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, strategies as st

from retinue._content import ContentBlock, Message, Reasoning, Text, ToolCall
from retinue._stream import (
    STOP,
    TOOL_CALLS,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)
from retinue.loop._assembler import BlockAssembler

texts = st.text(max_size=40)
ids = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=8)
blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(Text, texts),
    st.builds(Reasoning, texts, st.one_of(st.none(), st.text(min_size=1, max_size=12))),
    st.builds(ToolCall, ids, ids, texts),
)


def cut(draw: st.DrawFn, text: str) -> list[str]:
    """Split *text* at arbitrary drawn points (possibly into empty pieces)."""
    points = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def deltas(draw: st.DrawFn, index: int, block: ContentBlock) -> list[StreamChunk]:
    """Deltas that rebuild *block* from its partial alone."""
    if isinstance(block, Text):
        return [TextDelta(index, piece) for piece in cut(draw, block.text)]
    if isinstance(block, Reasoning):
        chunks: list[StreamChunk] = [ReasoningDelta(index, p) for p in cut(draw, block.text)]
        if block.signature is not None:
            chunks += [ReasoningDelta(index, "", signature=p) for p in cut(draw, block.signature)]
        return chunks
    assert isinstance(block, ToolCall)
    pieces = cut(draw, block.arguments)
    first = ToolCallDelta(index, block.id, pieces[0], name=block.name)
    return [first, *(ToolCallDelta(index, None, piece) for piece in pieces[1:])]


@st.composite
def streams(draw: st.DrawFn, *, close: bool) -> tuple[list[ContentBlock], list[StreamChunk]]:
    """A message's blocks and an interleaved chunk stream that assembles to it."""
    content = draw(st.lists(blocks, max_size=5))
    per_block: list[list[StreamChunk]] = []
    for index, block in enumerate(content):
        chunks: list[StreamChunk] = [BlockStart(index, block.type)]
        chunks += deltas(draw, index, block)
        if close:
            chunks.append(BlockEnd(index, block))
        per_block.append(chunks)
    stream: list[StreamChunk] = []
    # interleave blocks freely, keeping each block's own order and first starts in order
    cursors = [0] * len(per_block)
    started = 0
    while any(c < len(chunks) for c, chunks in zip(cursors, per_block, strict=True)):
        ready = [
            i
            for i, chunks in enumerate(per_block)
            if cursors[i] < len(chunks) and (cursors[i] > 0 or i == started)
        ]
        pick = draw(st.sampled_from(ready))
        stream.append(per_block[pick][cursors[pick]])
        if cursors[pick] == 0:
            started += 1
        cursors[pick] += 1
    return content, stream


def assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


@given(streams(close=False))
def test_assembler_any_chunking_of_unclosed_blocks_rebuilds_the_message(
    case: tuple[list[ContentBlock], list[StreamChunk]],
) -> None:
    """R10.6: however text, signatures and arguments are split and interleaved, partials rebuild them."""
    content, stream = case
    assert assemble(stream).message() == Message("assistant", tuple(content))


@given(streams(close=True), st.lists(st.integers(0, 4), max_size=6), texts)
def test_assembler_chunks_after_close_never_change_the_message(
    case: tuple[list[ContentBlock], list[StreamChunk]], late: list[int], noise: str
) -> None:
    """R10.6: once every block is closed, later deltas and closes are ignored."""
    content, stream = case
    assembler = assemble([*stream, Finish(TOOL_CALLS)])
    for index in late:
        if index < len(content):
            kind = content[index]
            if isinstance(kind, Text):
                assembler.feed(TextDelta(index, noise))
            elif isinstance(kind, Reasoning):
                assembler.feed(ReasoningDelta(index, noise, signature=noise))
            else:
                assembler.feed(ToolCallDelta(index, "late", noise, name="late"))
            assembler.feed(BlockEnd(index, Text(noise)))
    assert assembler.message() == Message("assistant", tuple(content))
    assert assembler.finish == TOOL_CALLS


@given(st.lists(texts, max_size=8))
def test_assembler_one_text_block_is_the_concatenation_of_its_deltas(parts: list[str]) -> None:
    """R10.6: text deltas of one index concatenate in feed order."""
    assembler = assemble([TextDelta(0, part) for part in parts])
    expected = (Text("".join(parts)),) if parts else ()
    assert assembler.message().content == expected
    assert assembler.finish == STOP
