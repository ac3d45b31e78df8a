"""The SSE decoder: events, line endings, comments, and byte streams split anywhere."""

from __future__ import annotations

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
    assert _decode([b"data: one\n\ndata: two"]) == [SseEvent(None, b"one"), SseEvent(None, b"two")]


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
