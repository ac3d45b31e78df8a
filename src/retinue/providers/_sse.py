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


_BOM = b"\xef\xbb\xbf"
EXCERPT_BYTES = 200
"""How much of a stream's start is kept, to show what a stream without events carried."""


@final
@attrs.define(eq=False)
class SseDecoder:
    """Split a byte stream into SSE events; feed chunks as they arrive.

    Line endings may be ``\\n``, ``\\r\\n`` or ``\\r``; comments and unknown
    fields are ignored; an event is dispatched at its blank line; a leading
    UTF-8 byte order mark is skipped.
    """

    # The undispatched bytes, one part per feed: joined once, when their event
    # completes, so an event arriving in many parts costs time linear in its size.
    _parts: list[bytes] = attrs.field(factory=list)
    _pending_bytes: int = attrs.field(default=0, init=False)
    _after_cr: bool = False
    _head: bytes | None = None
    # The stream's first bytes while they may be a byte order mark the network split.
    _lead: bytes = attrs.field(default=b"", init=False)
    dispatched: int = attrs.field(default=0, init=False)
    """How many events were dispatched so far."""
    torn: bool = attrs.field(default=False, init=False)
    """Whether the stream ended inside a line (set by :meth:`close`)."""

    def feed(self, data: bytes) -> list[SseEvent]:
        """Decode *data* and return the events it completed (possibly none)."""
        if not self._head:
            data = self._begin(data)
        if b"\r" in data or self._after_cr:
            data = self._normalise(data)
        parts = self._parts
        # Line endings are LF by now, so a blank line spans at most the last
        # byte of the pending parts and the first of *data*.
        if b"\n\n" not in data and not (parts and data[:1] == b"\n" and parts[-1].endswith(b"\n")):
            if data:
                parts.append(data)
                self._pending_bytes += len(data)
            return []
        buffer = b"".join((*parts, data)) if parts else data
        parts.clear()
        blocks = buffer.split(b"\n\n")
        rest = blocks.pop()
        self._pending_bytes = len(rest)
        if rest:
            parts.append(rest)
        events = []
        for block in blocks:
            if block:
                event = _parse_block(block.strip(b"\n") if block[:1] == b"\n" else block)
                if event is not None:
                    events.append(event)
        self.dispatched += len(events)
        return events

    def close(self) -> list[SseEvent]:
        """Flush at end of stream: a final event missing its blank line is still dispatched.

        When its last line has no line ending either, :attr:`torn` is set: the
        body may have been cut inside that line.
        """
        if self._lead:  # the body ended inside what may have been a byte order mark
            self._head, self._lead = self._lead, b""
            self._parts.append(self._head)
        rest = b"".join(self._parts)
        self._parts.clear()
        self._pending_bytes = 0
        self.torn = bool(rest) and not rest.endswith(b"\n")
        rest = rest.strip(b"\n")
        event = _parse_block(rest) if rest else None
        if event is None:
            return []
        self.dispatched += 1
        return [event]

    @property
    def pending(self) -> bool:
        """Whether undispatched bytes are buffered."""
        return any(part.strip() for part in self._parts)

    @property
    def pending_bytes(self) -> int:
        """How many undispatched bytes are buffered: the event being received, so far."""
        return self._pending_bytes

    @property
    def eventless_head(self) -> bytes | None:
        """The stream's first bytes when it dispatched no event at all (else ``None``)."""
        return None if self.dispatched else self._head

    def _begin(self, data: bytes) -> bytes:
        """*data* without the byte order mark the stream starts with, once it is known
        whether it starts with one; until then (the network may split the mark), nothing.

        The head is the first bytes after the mark: a part that was the mark alone
        leaves it empty, to be taken from the parts that follow.
        """
        if self._head is None:
            data = self._lead + data
            if len(data) < len(_BOM) and _BOM.startswith(data):
                self._lead = data
                return b""
            self._lead = b""
            data = data.removeprefix(_BOM)
        self._head = data[:EXCERPT_BYTES]
        return data

    def _normalise(self, data: bytes) -> bytes:
        if not data:
            return data  # an empty chunk keeps a pending CR pending
        # A chunk-final CR ends its line at once; a LF opening the next chunk
        # then completes that CRLF and is no second line ending.
        if self._after_cr and data[:1] == b"\n":
            data = data[1:]
        self._after_cr = data.endswith(b"\r")
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
