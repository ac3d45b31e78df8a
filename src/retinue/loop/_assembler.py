"""BlockAssembler: a pure fold of stream chunks into one assistant message (R10.6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

import attrs

from retinue._content import ContentBlock, Message, Reasoning, Text, ToolCall
from retinue._errors import ModelError
from retinue._lossless import NEG_SMALL_INT, SMALL_INT
from retinue._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from retinue.session._chunkcheck import chunk_problem

__all__ = ["BlockAssembler", "BlockAssemblyError"]

TEXT = Text.type
REASONING = Reasoning.type
TOOL_CALL = ToolCall.type


class BlockAssemblyError(ModelError, ValueError):
    """A stream cannot be assembled: an unclosed unknown block, or mixed delta kinds.

    A chunk with a field of the wrong type (``MALFORMED_CHUNK``) is refused too:
    logged, it would be a line the session's loader refuses.
    """

    code: str | None = "INVALID_STREAM"


class _NotAChunkError(BlockAssemblyError, TypeError):
    """Something that is no stream chunk was fed: the turn's ``MALFORMED_CHUNK``, and the
    ``TypeError`` a wrong argument is to whoever feeds an assembler directly."""


def _not_a_chunk(value: object) -> _NotAChunkError:
    return _NotAChunkError(
        f"the model streamed a value of type {type(value).__name__}, which is no stream chunk",
        code="MALFORMED_CHUNK",
    )


def _check(chunk: StreamChunk) -> None:
    """Raise ``MALFORMED_CHUNK`` naming the field unless *chunk* can be stored as it is.

    Called only when a chunk fails the exact-type test inline in its handler
    (which a ``str`` subclass or a reasoning block also does, and passes here),
    or when the index of a new block fails the range test (see ``_new_partial``).
    """
    problem = chunk_problem(chunk)
    if problem is not None:
        raise BlockAssemblyError(
            f"the model streamed a malformed {chunk.type} chunk: {problem}", code="MALFORMED_CHUNK"
        )


# No block is open for text: an object no chunk's index can be (``None`` or ``-1`` could).
_NO_TEXT_BLOCK = object()
# The closing blocks most streams send: a content block checks its own fields
# when it is built, so only its class is left to test.
_PLAIN_BLOCKS = frozenset({Text, ToolCall})
# The finish reasons that hold no fields to check.
_PLAIN_FINISHES = frozenset(type(reason) for reason in (STOP, TOOL_CALLS, MAX_TOKENS, ABORTED))


@attrs.define(eq=False, slots=True)
class _Partial:
    """The growing state of one block; text parts are joined only at ``message()``.

    A closed block keeps its parts: the assembler counts its text deltas by them.
    """

    index: int
    kind: str
    parts: list[str] = attrs.field(factory=list)
    signature: list[str] | None = None
    call_id: str | None = None
    name: str | None = None
    closed: ContentBlock | None = None

    def build(self) -> ContentBlock:
        """The block: the authoritative close if any, else one built from the partial."""
        if self.closed is not None:
            return self.closed
        # Deltas split inside a character (an emoji's UTF-16 pair) are joined whole by
        # the block built of them (R1.6).
        text = "".join(self.parts)
        if self.kind == TEXT:
            return Text(text)
        if self.kind == REASONING:
            signature = None if self.signature is None else "".join(self.signature)
            return Reasoning(text, signature)
        if self.kind == TOOL_CALL:
            return ToolCall(self.call_id or f"call-{self.index}", self.name or "", text)
        raise BlockAssemblyError(
            f"block {self.index} of type {self.kind!r} was never closed and cannot be built"
        )


@final
@attrs.define(eq=False)
class BlockAssembler:
    """Fold :data:`StreamChunk` values into an assistant :class:`Message` (R10.6).

    Pure and synchronous. Each :meth:`feed` costs O(1); text is joined once,
    in :meth:`message`. Blocks keep the order in which their index first
    appeared (start, delta or end).
    """

    _blocks: dict[int, _Partial] = attrs.field(factory=dict, init=False)
    _finish: FinishReason = attrs.field(default=STOP, init=False)
    _usage: Usage | None = attrs.field(default=None, init=False)
    # Chunks fed but for the text deltas of feed's fast path, which are counted
    # as the text parts that _text_delta did not append (see chunks).
    _chunks: int = attrs.field(default=0, init=False)
    _texts_appended: int = attrs.field(default=0, init=False)
    # The open text block that the last text delta extended: most chunks of a
    # stream extend it, and are appended without any lookup. The step's stream
    # loop (loop/_step.py) reads both fields, as feed's first test does, to append
    # such a delta without calling feed.
    _text_index: object = attrs.field(default=_NO_TEXT_BLOCK, init=False)
    _text_parts: list[str] = attrs.field(factory=list, init=False)

    @property
    def finish(self) -> FinishReason:
        """The last finish reason fed; ``STOP`` when the stream had none."""
        return self._finish

    @property
    def usage(self) -> Usage | None:
        """The last usage fed, or ``None``."""
        return self._usage

    @property
    def chunks(self) -> int:
        """How many chunks were fed (a walk over the blocks: the fast path counts nothing)."""
        text_parts = sum(len(p.parts) for p in self._blocks.values() if p.kind == TEXT)
        return self._chunks + text_parts - self._texts_appended

    def feed(self, chunk: StreamChunk) -> None:
        """Apply one chunk.

        Raises:
            BlockAssemblyError: a delta's kind does not match its open block, or a
                field of *chunk* has a type its stored line could not hold
                (``MALFORMED_CHUNK``).
            TypeError: *chunk* is not a stream chunk (a ``BlockAssemblyError`` too,
                coded ``MALFORMED_CHUNK``).
        """
        # ``is``, not ``==``: the open index is an int checked by _text_delta, and
        # True or 0.0 equal to it is not it; an int too long to write never opens a block there.
        if (
            type(chunk) is TextDelta
            and chunk.index is self._text_index
            and type(text := chunk.text) is str
        ):
            self._text_parts.append(text)  # counted by the chunks property, not here
            return
        self._chunks += 1
        handler = _HANDLERS.get(type(chunk))
        if handler is None:
            raise _not_a_chunk(chunk)
        handler(self, chunk)

    def _text_delta(self, chunk: TextDelta) -> None:
        if type(chunk.index) is not int or type(chunk.text) is not str:
            _check(chunk)
        partial = self._open(chunk.index, TEXT, chunk)
        if partial is not None:
            partial.parts.append(chunk.text)
            self._texts_appended += 1
            self._text_index, self._text_parts = chunk.index, partial.parts

    def _block_start(self, chunk: BlockStart) -> None:
        if type(chunk.index) is not int or type(chunk.block_type) is not str:
            _check(chunk)
        if chunk.index not in self._blocks:
            self._new_partial(chunk.index, chunk.block_type, chunk)

    def _set_usage(self, chunk: UsageChunk) -> None:
        if type(chunk.usage) is not Usage:
            _check(chunk)
        self._usage = chunk.usage

    def _set_finish(self, chunk: Finish) -> None:
        if type(chunk.reason) not in _PLAIN_FINISHES:
            _check(chunk)
        self._finish = chunk.reason

    def message(self) -> Message:
        """Build the assistant message over every block seen so far.

        Raises:
            BlockAssemblyError: an unclosed block has a type that cannot be built.
        """
        return Message("assistant", self.blocks())

    def blocks(self) -> tuple[ContentBlock, ...]:
        """The content of :meth:`message`, without building the message.

        Raises:
            BlockAssemblyError: an unclosed block has a type that cannot be built.
        """
        return tuple(map(_Partial.build, self._blocks.values()))

    def _open(self, index: int, kind: str, chunk: StreamChunk) -> _Partial | None:
        """The open partial at *index*, created on first sight; ``None`` once it is closed."""
        partial = self._blocks.get(index)
        if partial is None:
            return self._new_partial(index, kind, chunk)
        if partial.closed is not None:
            return None
        if partial.kind != kind:
            raise BlockAssemblyError(
                f"{chunk.type} for block {index}, which is a {partial.kind!r} block"
            )
        return partial

    def _new_partial(self, index: int, kind: str, chunk: StreamChunk) -> _Partial:
        """Open the block at *index*, an exact int its handler checked the type of.

        Its range is tested here, once per block: a later chunk that finds the
        block holds an int equal to this one, so it tests only the type.
        """
        if not NEG_SMALL_INT <= index <= SMALL_INT:
            _check(chunk)  # a longer int is refused only if JSON cannot write it
        partial = self._blocks[index] = _Partial(index, kind)
        return partial

    def _reasoning_delta(self, chunk: ReasoningDelta) -> None:
        if (
            type(chunk.index) is not int
            or type(chunk.text) is not str
            or chunk.signature is not None
        ):
            _check(chunk)
        partial = self._open(chunk.index, REASONING, chunk)
        if partial is None:
            return
        partial.parts.append(chunk.text)
        if chunk.signature is not None:
            if partial.signature is None:
                partial.signature = []
            partial.signature.append(chunk.signature)

    def _tool_call_delta(self, chunk: ToolCallDelta) -> None:
        call_id, name = chunk.id, chunk.name
        if (
            type(chunk.index) is not int
            or type(chunk.arguments_delta) is not str
            or (call_id is not None and type(call_id) is not str)
            or (name is not None and type(name) is not str)
        ):
            _check(chunk)
        partial = self._open(chunk.index, TOOL_CALL, chunk)
        if partial is None:
            return
        if call_id:
            partial.call_id = call_id
        if name:
            partial.name = name
        partial.parts.append(chunk.arguments_delta)

    def _close(self, chunk: BlockEnd) -> None:
        block = chunk.block
        if type(chunk.index) is not int or type(block) not in _PLAIN_BLOCKS:
            _check(chunk)  # another kind of block, checked field by field
        partial = self._blocks.get(chunk.index)
        if partial is None:
            partial = self._new_partial(chunk.index, block.type, chunk)
        if partial.closed is None:
            partial.closed = block
        if chunk.index == self._text_index:
            self._text_index = _NO_TEXT_BLOCK


# One dispatch per chunk type: a dict lookup is cheaper than a chain of class patterns.
_HANDLERS: dict[type, Callable[[BlockAssembler, Any], None]] = {
    TextDelta: BlockAssembler._text_delta,
    ToolCallDelta: BlockAssembler._tool_call_delta,
    ReasoningDelta: BlockAssembler._reasoning_delta,
    BlockStart: BlockAssembler._block_start,
    BlockEnd: BlockAssembler._close,
    UsageChunk: BlockAssembler._set_usage,
    Finish: BlockAssembler._set_finish,
}
