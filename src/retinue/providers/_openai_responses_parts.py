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


@attrs.frozen
class Attributed:
    """What the parts completed so far account for in a block of deltas without a
    ``content_index``, which streams a message's parts one after another."""

    parts: tuple[tuple[int, str], ...] = ()
    """The parts completed so far (index and text), in part order."""
    offset: int = 0
    """How much of the block the parts completed so far hold."""
    mark: int = 0
    """The block's length when a part was last completed."""
    claimed: bool = False
    """Whether the text from *offset* to *mark* is the last part's by order alone: its
    complete text is not how the text begins."""


def attribute(streamed: str, done: Attributed, index: int, text: str) -> tuple[bool, Attributed]:
    """Whether the block's deltas, *streamed* so far, hold the part *index* completed now
    with *text* (the parts before it completed already), and what they account for then.

    Deltas since the last part completed are this part's. A server may complete
    the parts together after all their deltas: what the parts before it left
    is this part's too when it begins or ends with *text*, or *text* begins
    with it (the complete text a full stop longer). Nothing since, and nothing
    that reads as this part, is a part sent only complete; but when the deltas
    left were never read as any part's text, they are taken to hold this part,
    where adding its complete text could give it twice.
    """
    parts, length, mark = tuple(sorted((*done.parts, (index, text)))), len(streamed), done.mark
    # What a part claimed by order alone ends where deltas since it completed begin.
    offset = mark if done.claimed and length > mark else done.offset
    left, fresh = streamed[offset:], streamed[mark:]
    if left.startswith(text):
        return True, Attributed(parts, offset + len(text), length)
    if fresh.startswith(text):  # what the parts before left is theirs (trimmed)
        return True, Attributed(parts, mark + len(text), length)
    if (left and text.startswith(left)) or (len(left) > len(text) and left.endswith(text)):
        return True, Attributed(parts, length, length)
    if fresh and not text.startswith(fresh):
        return True, Attributed(parts, offset, length, claimed=True)
    if fresh or (done.claimed and left):
        return True, Attributed(parts, length, length)
    return False, Attributed(parts, length, length)
