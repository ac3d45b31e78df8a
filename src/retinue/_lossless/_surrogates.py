"""Surrogate pairs held as two code points, joined into the character they encode (R1.6)."""

from __future__ import annotations

__all__ = ["holds_surrogate", "joined_surrogates"]


def joined_surrogates(text: str) -> str:
    """*text* with each high surrogate followed by a low one joined into their character.

    Such a pair (two stream deltas split inside an emoji, say) is written to JSON
    as two ``\\u`` escapes, which every JSON reader joins into one character: the
    stored string would not be the logged one. Joined first, it is the same
    string in the log and in the store. A lone surrogate is kept: its escape
    reads back as itself.
    """
    if text.isascii() or not holds_surrogate(text):
        return text
    # UTF-16 with surrogatepass joins each pair and passes a lone one through as it is.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def holds_surrogate(text: str) -> bool:
    """Whether *text* holds a surrogate code point: only a surrogate fails to encode."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
