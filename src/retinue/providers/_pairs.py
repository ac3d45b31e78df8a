"""Deltas that end inside a surrogate pair give its high half to the next delta (pure, no I/O).

A server that escapes text as UTF-16 (``\\ud83d`` ... ``\\ude00``) may split an
emoji between two events: each delta then holds one half of it, which no
UTF-8 consumer (a terminal, a socket, a web page) can write. Held back until
the next delta of its block, the half joins its pair there, and each delta is
text of its own.
"""

from __future__ import annotations

from typing import final

import attrs

from retinue._lossless import joined_surrogates
from retinue._stream import (
    BlockEnd,
    BlockStart,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)

__all__ = ["PairedDeltas"]

_Delta = TextDelta | ReasoningDelta | ToolCallDelta


def _is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _text_of(delta: _Delta) -> str:
    return delta.arguments_delta if type(delta) is ToolCallDelta else delta.text


def _with_text(delta: _Delta, text: str) -> _Delta:
    if type(delta) is ToolCallDelta:
        return attrs.evolve(delta, arguments_delta=text)
    return attrs.evolve(delta, text=text)


def _half(delta: _Delta, half: str) -> _Delta:
    """A delta of *delta*'s kind and block holding only *half*: the id, name or signature
    went out with the rest of *delta*, and a delta that repeated them would add them twice."""
    if type(delta) is ToolCallDelta:
        return ToolCallDelta(delta.index, None, half)
    if type(delta) is ReasoningDelta:
        return ReasoningDelta(delta.index, half)
    return TextDelta(delta.index, half)


@final
@attrs.define(eq=False)
class PairedDeltas:
    """Moves a delta's trailing high surrogate to the next delta of its block.

    A half whose block ends, or whose stream finishes, without its pair goes
    out alone just before that end, so no text is lost.
    """

    # Per block index: that block's last delta, holding only the held-back half.
    _held: dict[int, _Delta] = attrs.field(factory=dict)
    # The indexes whose deltas passed through here: a delta that was only a half still
    # goes out, empty, unless its block is known open, so no block opens out of place.
    _seen: set[int] = attrs.field(factory=set)

    def whole(self, chunks: list[StreamChunk]) -> list[StreamChunk]:
        """*chunks* with each surrogate pair split between two deltas joined in the second."""
        if not self._held:
            for chunk in chunks:
                if _ends_inside_a_pair(chunk):
                    break
            else:
                return chunks  # the usual event: nothing to hold or to give
        out: list[StreamChunk] = []
        for chunk in chunks:
            out.extend(self._one(chunk))
        return out

    def rest(self) -> list[StreamChunk]:
        """The halves still held at the end of a stream that sent no finish, each alone."""
        held: list[StreamChunk] = list(self._held.values())
        self._held.clear()
        return held

    def _one(self, chunk: StreamChunk) -> list[StreamChunk]:
        if isinstance(chunk, TextDelta | ReasoningDelta | ToolCallDelta):
            return self._delta(chunk)
        if isinstance(chunk, BlockEnd):
            held = self._held.pop(chunk.index, None)
            return [chunk] if held is None else [held, chunk]
        if isinstance(chunk, BlockStart):
            return [chunk]  # another block opens: a half held for one still open waits on
        # Usage or the finish: nothing follows in any block, so every half goes out now.
        return [*self.rest(), chunk]

    def _delta(self, delta: _Delta) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        held = self._held.pop(delta.index, None)
        text = _text_of(delta)
        if held is not None:
            if type(held) is type(delta):
                text = joined_surrogates(_text_of(held) + text)
            else:
                out.append(held)  # another kind of delta at that index: the half stays alone
        if text and _is_high_surrogate(text[-1]):
            self._held[delta.index] = _half(delta, text[-1])
            text = text[:-1]
        first = delta.index not in self._seen
        self._seen.add(delta.index)
        # A tool call's id and name go out at once; a text delta of only the half waits.
        if text or first or type(delta) is ToolCallDelta or _signs(delta):
            out.append(_with_text(delta, text))
        return out


def _signs(delta: _Delta) -> bool:
    return type(delta) is ReasoningDelta and delta.signature is not None


def _ends_inside_a_pair(chunk: StreamChunk) -> bool:
    kind = type(chunk)
    if kind is TextDelta or kind is ReasoningDelta:
        text = chunk.text  # type: ignore[union-attr]
    elif kind is ToolCallDelta:
        text = chunk.arguments_delta  # type: ignore[union-attr]
    else:
        return False
    return bool(text) and _is_high_surrogate(text[-1])
