"""``MessageHistory``: the immutable view a request carries of the model-visible messages (R5, R8.6)."""

from __future__ import annotations

import pytest

from retinue import Message, Text
from retinue._request import MessageHistory


def _message(text: str) -> Message:
    return Message("user", (Text(text),))


A, B, C, P, Q = (_message(text) for text in "abcpq")


def _view_of_a_growing_log() -> tuple[list[Message], MessageHistory]:
    """A snapshot of two messages of a log that has grown by one since (the session's list)."""
    log = [A, B]
    view = MessageHistory(log, 2).with_prefix((P, Q))
    log.append(C)
    return log, view


def test_a_view_reads_its_prefix_then_its_snapshot_in_every_direction() -> None:
    """R8.6: prefix first, then the log's messages as they were when the view was taken."""
    _, view = _view_of_a_growing_log()
    assert list(view) == [P, Q, A, B]
    assert list(reversed(view)) == [B, A, Q, P]
    assert [view[index] for index in range(-4, 4)] == [P, Q, A, B, P, Q, A, B]
    assert view[1:3] == (Q, A)
    assert len(view) == 4


@pytest.mark.parametrize("index", [4, 5, -5])
def test_an_index_past_the_view_is_an_index_error_even_where_the_log_has_grown(index: int) -> None:
    """A view never shows a message logged after it was taken, by index either."""
    _, view = _view_of_a_growing_log()
    with pytest.raises(IndexError):
        view[index]


def test_a_second_prefix_goes_in_front_of_the_first() -> None:
    """``with_prefix`` puts its prefix in front of everything the view already shows."""
    view = MessageHistory([A], 1).with_prefix((Q,)).with_prefix((P,))
    assert list(view) == [P, Q, A]


def test_a_view_equals_a_sequence_of_its_messages_but_never_a_string() -> None:
    """Equal to a list or tuple of the same messages; a str, even empty, is no history."""
    _, view = _view_of_a_growing_log()
    assert view == [P, Q, A, B]
    assert view == (P, Q, A, B)
    assert view != [P, Q, A]
    assert MessageHistory() == []
    assert MessageHistory() != ""
