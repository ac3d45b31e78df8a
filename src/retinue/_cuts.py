"""Cutting text for a model to read: never inside a character a reader sees as one."""

from __future__ import annotations

import unicodedata

__all__ = ["text_start"]

_ZWJ = "\u200d"
_MARKS = frozenset({"Mn", "Mc", "Me"})


def text_start(text: str, limit: int) -> str:
    """The start of *text*, at most *limit* code points, ending where a character ends.

    A cut by code point can part a letter from its accent, an emoji from its
    skin tone or variation selector, a joined emoji sequence, or a flag's two
    regional indicators; the model would read a different character. The cut
    moves back to the cluster's start, or stays at *limit* when one cluster is
    longer than that.
    """
    if len(text) <= limit:
        return text
    cut = limit
    while cut > 0 and _continues(text, cut):
        cut -= 1
    return text[:cut] if cut else text[:limit]


def _continues(text: str, at: int) -> bool:
    """Whether ``text[at]`` belongs to the character ``text[at - 1]`` is part of."""
    char, before = text[at], text[at - 1]
    if before == _ZWJ or _extends(char):
        return True
    return _is_regional(char) and _regionals_before(text, at) % 2 == 1


def _extends(char: str) -> bool:
    code = ord(char)
    return (
        char == _ZWJ
        or unicodedata.category(char) in _MARKS
        or 0x1F3FB <= code <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences
        or 0x1160 <= code <= 0x11FF  # Hangul vowel and final jamo
    )


def _is_regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _regionals_before(text: str, at: int) -> int:
    count = 0
    while at - count > 0 and _is_regional(text[at - count - 1]):
        count += 1
    return count
