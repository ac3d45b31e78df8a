"""The SSE decoder on events that arrive in many parts, and blank lines split between parts."""

from __future__ import annotations

import pytest

from retinue.providers._sse import SseDecoder, SseEvent


def _decode(parts: list[bytes]) -> list[SseEvent]:
    decoder = SseDecoder()
    events = [event for part in parts for event in decoder.feed(part)]
    return events + decoder.close()


def _split(body: bytes, size: int) -> list[bytes]:
    return [body[start : start + size] for start in range(0, len(body), size)]


@pytest.mark.parametrize("ending", [b"\n", b"\r", b"\r\n"])
def test_a_large_event_in_small_parts_decodes_to_the_same_event(ending: bytes) -> None:
    """A 4 MB event fed in 1 KB parts is the one event the whole body decodes to, and the
    events around it are untouched."""
    data = b"x" * (4 << 20)
    body = ending.join([b"data: first", b"", b"event: big", b"data: " + data, b"", b"data: last"])
    body += ending * 2
    expected = [SseEvent(None, b"first"), SseEvent("big", data), SseEvent(None, b"last")]
    assert _decode([body]) == expected
    assert _decode(_split(body, 1024)) == expected


@pytest.mark.parametrize(
    "parts",
    [
        [b"data: a\n", b"\n", b"data: b\n\n"],
        [b"data: a\r\n", b"\r\n", b"data: b\r\n\r\n"],
        [b"data: a\r\n\r", b"\n", b"data: b\r\n\r\n"],
        [b"data: a\r", b"\r", b"data: b\r\r"],
        [b"data: a", b"\n", b"\n", b"data: b", b"\n\n"],
        [b"data: a\n", b"", b"\n", b"data: b\n\n"],
    ],
)
def test_a_blank_line_split_between_parts_ends_its_event_there(parts: list[bytes]) -> None:
    """A blank line whose line endings arrive in different parts dispatches its event
    before the next event's part arrives."""
    decoder = SseDecoder()
    first = [event for part in parts[:-1] for event in decoder.feed(part)]
    assert first == [SseEvent(None, b"a")]
    assert decoder.feed(parts[-1]) == [SseEvent(None, b"b")]
    assert not decoder.pending
    assert decoder.close() == []


@pytest.mark.parametrize(
    "parts",
    [
        [b"\xef", b"\xbb\xbfdata: one\n\n"],
        [b"\xef\xbb", b"\xbfdata: one\n\n"],
        [b"\xef", b"", b"\xbb", b"\xbf", b"data: one\n\n"],
        [b"\xef", b"\xbb\xbf", b"data: one\n\n"],
    ],
    ids=["1+2", "2+1", "byte-by-byte", "mark-alone"],
)
def test_a_byte_order_mark_split_between_parts_is_skipped(parts: list[bytes]) -> None:
    """A UTF-8 byte order mark the network split over the first parts is skipped, as a
    whole one is, not kept in the first event's field name, which would lose the event."""
    assert _decode(parts) == [SseEvent(None, b"one")]


def test_a_body_of_a_part_of_a_byte_order_mark_shows_it() -> None:
    """A body that ends inside what may be a byte order mark carried no event: the bytes
    it did carry are its start, to show in the error, and it ended inside a line."""
    decoder = SseDecoder()
    assert decoder.feed(b"\xef\xbb") == []
    assert decoder.close() == []
    assert (decoder.eventless_head, decoder.torn) == (b"\xef\xbb", True)


def test_bytes_that_only_start_like_a_byte_order_mark_are_kept() -> None:
    """A first part that starts a byte order mark the next does not finish is data."""
    assert _decode([b"\xef", b"data: one\n\n"]) == []
    assert _decode([b"\xef\xbb", b"\n\ndata: one\n\n"]) == [SseEvent(None, b"one")]
