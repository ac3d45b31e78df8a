"""An incremental Server-Sent Events decoder over raw bytes (pure, no I/O)."""

from __future__ import annotations

from typing import final

import attrs

__all__ = ["SseDecoder", "SseEvent"]


@final
@attrs.frozen
class SseEvent:
    """One dispatched event: its ``event:`` name (``None`` if absent) and its data bytes."""

    event: str | None
    data: bytes


def _parse_block(block: bytes) -> SseEvent | None:
    """Parse one blank-line-terminated block; ``None`` when it carries no data."""
    if block.startswith(b"data:") and b"\n" not in block:
        value = block[5:]
        return SseEvent(None, value[1:] if value[:1] == b" " else value)
    name: str | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    if not data:
        return None
    return SseEvent(name, b"\n".join(data))


@final
@attrs.define(eq=False)
class SseDecoder:
    """Split a byte stream into SSE events; feed chunks as they arrive.

    Line endings may be ``\\n``, ``\\r\\n`` or ``\\r``; comments and unknown
    fields are ignored; an event is dispatched at its blank line.
    """

    _buffer: bytes = b""
    _pending_cr: bool = False

    def feed(self, data: bytes) -> list[SseEvent]:
        """Decode *data* and return the events it completed (possibly none)."""
        if b"\r" in data or self._pending_cr:
            data = self._normalise(data)
        buffer = self._buffer + data if self._buffer else data
        if b"\n\n" not in buffer:
            self._buffer = buffer
            return []
        blocks = buffer.split(b"\n\n")
        self._buffer = blocks.pop()
        events = []
        for block in blocks:
            if block:
                event = _parse_block(block.strip(b"\n") if block[:1] == b"\n" else block)
                if event is not None:
                    events.append(event)
        return events

    def close(self) -> list[SseEvent]:
        """Flush at end of stream: a final event missing its blank line is still dispatched."""
        rest, self._buffer = self._buffer.strip(b"\n"), b""
        if not rest:
            return []
        event = _parse_block(rest)
        return [] if event is None else [event]

    @property
    def pending(self) -> bool:
        """Whether undispatched bytes are buffered."""
        return bool(self._buffer.strip())

    def _normalise(self, data: bytes) -> bytes:
        if self._pending_cr:
            data = b"\r" + data
            self._pending_cr = False
        if data.endswith(b"\r"):
            data = data[:-1]
            self._pending_cr = True
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
