"""Text cut for a model to read ends where a character ends, as a reader sees characters."""

from __future__ import annotations

import pytest

from retinue._cuts import text_start

FLAG = "\U0001f1eb\U0001f1f7"  # two regional indicators: one flag
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # joined by zero-width joiners
WAVE = "\U0001f44b\U0001f3fd"  # a hand and its skin tone
HEART = "\u2764\ufe0f"  # a heart and its emoji variation selector
ACCENTED = "e\u0301"  # e and a combining acute accent
SCOTLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
HANGUL = "\u1100\u1161\u11a8"  # a syllable written as three jamo


@pytest.mark.parametrize("cluster", [FLAG, FAMILY, WAVE, HEART, ACCENTED, SCOTLAND, HANGUL])
def test_a_cut_inside_a_character_moves_to_its_start(cluster: str) -> None:
    """Every cut that would fall inside *cluster* ends the text just before it."""
    text = "ab" + cluster + "cd"
    for inside in range(3, 2 + len(cluster)):
        assert text_start(text, inside) == "ab"
    assert text_start(text, 2 + len(cluster)) == "ab" + cluster


def test_flags_in_a_row_are_cut_between_pairs() -> None:
    """A run of regional indicators pairs from its start: a cut never takes half a flag."""
    text = FLAG * 5
    assert text_start(text, 5) == FLAG * 2
    assert text_start(text, 6) == FLAG * 3


def test_text_within_the_limit_is_whole() -> None:
    assert text_start(ACCENTED, 2) == ACCENTED
    assert text_start("", 0) == ""


def test_a_character_longer_than_the_limit_is_cut_at_the_limit() -> None:
    """One cluster of more code points than the limit cannot fit: the text is cut by count."""
    marks = "a" + "\u0301" * 50
    assert text_start(marks, 10) == marks[:10]
