"""The SSE decoder: events, line endings, comments, and byte streams split anywhere."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from retinue.providers._sse import SseDecoder, SseEvent

from .support import ALL_FIXTURES, load


def _decode(parts: list[bytes]) -> list[SseEvent]:
    decoder = SseDecoder()
    events = [event for part in parts for event in decoder.feed(part)]
    return events + decoder.close()


def test_sse_decoder_reads_named_multiline_events_and_skips_comments() -> None:
    """Event names, multi-line data, comments and CRLF endings are handled."""
    body = b': keep-alive\r\nevent: ping\r\ndata: a\r\ndata:b\r\n\r\ndata: {"x": 1}\n\n\n'
    assert _decode([body]) == [SseEvent("ping", b"a\nb"), SseEvent(None, b'{"x": 1}')]


def test_sse_decoder_flushes_a_final_event_without_blank_line() -> None:
    """A last event missing its terminating blank line is still delivered at close."""
    expected = [SseEvent(None, b"one"), SseEvent(None, b"two")]
    assert _decode([b"data: one\n\ndata: two\n"]) == expected
    assert _decode([b"data: one\r\rdata: two\r"]) == expected


@pytest.mark.parametrize(
    ("tail", "last"),
    [(b"data: tw", b"tw"), (b"event: x\ndata: tw", b"tw"), (b"data: two\ndata: th", b"two\nth")],
)
def test_sse_decoder_marks_a_final_event_cut_inside_a_line(tail: bytes, last: bytes) -> None:
    """A body that ends inside a line is flagged ``torn``: its last event may be incomplete."""
    decoder = SseDecoder()
    assert decoder.feed(b"data: one\n\n" + tail) == [SseEvent(None, b"one")]
    (event,) = decoder.close()
    assert (event.data, decoder.torn) == (last, True)
    whole = SseDecoder()
    whole.feed(b"data: one\n\n" + tail + b"\n")
    whole.close()
    assert not whole.torn


def test_sse_decoder_strips_a_leading_byte_order_mark() -> None:
    """A UTF-8 BOM at the start of the stream is not part of the first field name."""
    assert _decode([b"\xef\xbb\xbfdata: one\n\n"]) == [SseEvent(None, b"one")]
    assert _decode([b"\xef\xbb\xbf", b"data: one\n\n"]) == [SseEvent(None, b"one")]


def test_sse_decoder_dispatches_an_event_ending_in_a_carriage_return_at_once() -> None:
    """With CR line endings, an event whose blank line ends a chunk is not held back."""
    decoder = SseDecoder()
    assert decoder.feed(b"data: one\r\r") == [SseEvent(None, b"one")]
    assert decoder.feed(b"\ndata: two\r\n\r\n") == [SseEvent(None, b"two")]


def test_sse_decoder_keeps_a_split_crlf_across_an_empty_chunk() -> None:
    """A CR ending one chunk and the LF opening a later one are one line ending, even
    with an empty chunk between them."""
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\ndata: b\n\n") == [SseEvent(None, b"a\nb")]


def test_sse_decoder_ignores_blocks_without_data() -> None:
    """A block with only an event name dispatches nothing."""
    assert _decode([b"event: lonely\n\n"]) == []


SSE_BODIES = {
    path.name: exchange["response"]["body"].encode()
    for path in ALL_FIXTURES
    if (exchange := load(path.name))["response"]["headers"]
    .get("content-type", "")
    .startswith("text/event-stream")
}


@given(st.data())
def test_sse_decoder_is_independent_of_how_bytes_are_split(data: st.DataObject) -> None:
    """Any split of a recorded stream decodes to the same events as the whole body."""
    body = SSE_BODIES[data.draw(st.sampled_from(sorted(SSE_BODIES)))]
    if data.draw(st.booleans()):
        body = body.replace(b"\n", b"\r\n")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=30)))
    parts = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert _decode(parts) == _decode([body])
    assert _decode([body])
