"""The texts of a Responses message's parts, and which of them a block of deltas holds (pure)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["left_out", "part_texts"]


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
