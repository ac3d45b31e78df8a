"""The texts of a Responses message's parts, and which of them a block of deltas holds (pure)."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = ["Attributed", "attribute", "left_out", "part_texts"]


def part_texts(parts: list[object]) -> list[tuple[int, str]]:
    """Each content or summary part's text (or refusal), with its index, when it has some."""
    texts = (
        (index, part.get("text") or part.get("refusal"))
        for index, part in enumerate(parts)
        if isinstance(part, dict)
    )
    return [(index, text) for index, text in texts if isinstance(text, str) and text]


def left_out(streamed: str, texts: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """The parts of *texts* that the *streamed* text of a block of deltas does not hold.

    Deltas without a ``content_index`` stream some of the parts, one after
    another, in part order. Parts left out (sent only complete) are kept only
    when the others make up the block exactly: a block that differs from its
    parts (a server trimming the complete text) streamed them all.
    """
    left = []
    for index, text in texts:
        if streamed.startswith(text):
            streamed = streamed[len(text) :]
        else:
            left.append((index, text))
    return left if not streamed else []


Parts = tuple[tuple[int, str], ...]
"""Parts of a message: each one's index and text, in part order."""


@attrs.frozen
class Attributed:
    """What the parts completed so far account for in a block of deltas without a
    ``content_index``, which streams a message's parts one after another."""

    parts: Parts = ()
    """The parts completed so far."""
    offset: int = 0
    """How much of the block the parts completed so far hold."""
    mark: int = 0
    """The block's length when a part was last completed."""
    pending: Parts = ()
    """The parts completed whose text does not read as the deltas after *offset*: streamed
    with other text, or sent only complete while the deltas after are a later part's."""


def attribute(streamed: str, done: Attributed, index: int, text: str) -> tuple[Parts, Attributed]:
    """The parts that the block's deltas, *streamed* so far, do not hold and that are
    known now, the part *index* completed now with *text* (the parts before it completed
    already) among them; and what the deltas account for then.

    A part's text where the parts before it end in the block (or ending the
    deltas left there, or the deltas a full stop shorter) is the deltas'; the
    parts left pending before it, whose text did not read there, were sent only
    complete when it begins there. With no deltas since the last part
    completed and none pending, the part was sent only complete. Else it is
    pending: a later part begun where it would have, or the message's complete
    item (:func:`left_out`), tells; with neither, the deltas are taken to hold
    it, where its complete text could give it twice.
    """
    parts, length = tuple(sorted((*done.parts, (index, text)))), len(streamed)
    offset, mark, pending = done.offset, done.mark, done.pending
    left, fresh = streamed[offset:], streamed[mark:]
    if left.startswith(text):
        return pending, Attributed(parts, offset + len(text), length)
    if fresh.startswith(text):  # what was left before it is the earlier parts' own
        return (), Attributed(parts, mark + len(text), length)
    if (left and text.startswith(left)) or (len(left) > len(text) and left.endswith(text)):
        return (), Attributed(parts, length, length)
    if not fresh and not pending:
        # What is left may be a later part's, as well as the rest of an earlier part's.
        return ((index, text),), Attributed(parts, offset, length)
    return (), Attributed(parts, offset, length, (*pending, (index, text)))
