"""The surface (history view) and derive_messages projection (SPEC 4.5, 5)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import attrs

from retinue._content import ContentBlock, Message, Text, ToolResultBlock
from retinue._errors import SessionError
from retinue._request import MessageHistory

from ._events import (
    AssistantMessage,
    ContextMessage,
    Event,
    Replace,
    SteeringMessage,
    ToolResultEvent,
    UserMessage,
)

__all__ = ["ENVELOPE_TAGS", "Surface", "is_envelope", "project"]


# A surrogate left alone in a str: its pairs are joined when the source is built (R1.6).
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _quoted(kind: str) -> str:
    """*kind* JSON-quoted as JavaScript's ``JSON.stringify`` quotes it (R5.2).

    Other characters are kept as they are, where ``json.dumps`` would show the
    model ``\\u00e9`` for an ``é``; a lone surrogate is escaped, as no
    character can show it.
    """
    quoted = json.dumps(kind, ensure_ascii=False)
    if quoted.isascii():
        return quoted
    return _LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", quoted)


def _envelope(tag: str, kind: str, content: tuple[ContentBlock, ...]) -> Message:
    # A source's kind is an open string too: its tags are written as the content's are.
    opening = Text(f"<{tag} source={_TAG_INSIDE.sub(_ESCAPED, _quoted(kind))}>")
    return Message("user", (opening, *map(_inert, content), Text(f"</{tag}>")))


ENVELOPE_TAGS = ("context", "steering")
"""The tags :func:`project` wraps context and steering in, ``<context source="...">``."""

# An envelope's tag written inside one: text from a fetched page, say, could close its
# context and open a steering of the user's, which the model could not tell apart.
_TAG_INSIDE = re.compile(rf"<(/?(?:{'|'.join(ENVELOPE_TAGS)}))(?=[\s>/]|$)", re.IGNORECASE)
_ESCAPED = r"&lt;\1"


def _inert(block: ContentBlock) -> ContentBlock:
    """*block* with every envelope tag in its text written ``&lt;tag``, so it opens none."""
    if type(block) is not Text or "<" not in block.text:
        return block
    text = _TAG_INSIDE.sub(_ESCAPED, block.text)
    return block if text == block.text else Text(text)


# The opening's start and the closing of each envelope _envelope makes.
_ENVELOPES = tuple((f"<{tag} source=", f"</{tag}>") for tag in ENVELOPE_TAGS)


def is_envelope(content: Sequence[ContentBlock]) -> bool:
    """Whether *content* is context or steering as :func:`project` wraps it (R5.2): its
    first block opens the envelope and its last closes it."""
    if len(content) < 2:
        return False
    first, last = content[0], content[-1]
    if type(first) is not Text or type(last) is not Text:
        return False
    return any(
        first.text.startswith(opening) and last.text == closing for opening, closing in _ENVELOPES
    )


def project(event: Event) -> Message | None:
    """Project one surface event to its model-visible message (R5.2); pure."""
    data = event.data
    if isinstance(data, UserMessage):
        return Message("user", data.content)
    if isinstance(data, AssistantMessage):
        return Message("assistant", data.content) if data.content else None
    if isinstance(data, ToolResultEvent):
        block = ToolResultBlock(data.call_id, data.content, data.is_error)
        return Message("user", (block,))
    if isinstance(data, ContextMessage):
        return _envelope("context", data.source.kind, data.content)
    if isinstance(data, SteeringMessage):
        return _envelope("steering", data.source.kind, data.content)
    return None


@attrs.define(eq=False)
class Surface:
    """The ordered surface of a session, maintained incrementally (R4.19-R4.21).

    Appends are O(1). A replace indexes the events appended since the last
    one, swaps the replaced range for its one event and rebuilds the positions
    and the message list once; snapshots taken earlier keep their old list.
    """

    # The seq and the projected message of each surface event, in surface
    # order: two parallel lists, so an append retains no pair per event.
    _seqs: list[int] = attrs.field(factory=list)
    _projections: list[Message | None] = attrs.field(factory=list)
    # Each surface event's index in _seqs, by seq, for the first
    # len(_positions) events: indexed when a replace needs it, not per append.
    _positions: dict[int, int] = attrs.field(factory=dict)
    _messages: list[Message] = attrs.field(factory=list)
    # What adapters derived from _messages (MessageHistory's derived_of): one
    # per list, as a replace starts a new list.
    _derived: dict[object, object] = attrs.field(factory=dict)
    generation: int = 0

    def check(self, event: Event) -> None:
        """Raise :class:`SessionError` if *event*'s surface op cannot apply; never changes the surface."""
        op = event.surface_op
        if isinstance(op, Replace):
            self._replaced_range(op, event.source_event_seqs or ())

    def apply(self, event: Event) -> None:
        """Apply *event*'s surface op; call :meth:`check` first."""
        op = event.surface_op
        if not isinstance(op, Replace):
            self.append(event)
            return
        first, last = self._replaced_range(op, event.source_event_seqs or ())
        self._splice(first, last, event.seq, project(event))

    def append(self, event: Event) -> None:
        """Append *event*, whose surface op is ``"append"``, at the end of the surface."""
        data = event.data
        # The two kinds every step appends, projected here as project() does: their
        # classes are final, so one exact test spares its call and its isinstance chain.
        if type(data) is AssistantMessage:
            message = Message("assistant", data.content) if data.content else None
        elif type(data) is ToolResultEvent:
            block = ToolResultBlock(data.call_id, data.content, data.is_error)
            message = Message("user", (block,))
        else:
            message = project(event)
        self._seqs.append(event.seq)
        self._projections.append(message)
        if message is not None:
            self._messages.append(message)

    def snapshot(self) -> MessageHistory:
        """Return the current history as an immutable view; O(1)."""
        return MessageHistory(self._messages, len(self._messages), derived=self._derived)

    def _replaced_range(self, op: Replace, sources: tuple[int, ...]) -> tuple[int, int]:
        """The indices in ``_seqs`` of the first and the last replaced event."""
        positions = self._indexed_positions()
        first = positions.get(op.start)
        last = positions.get(op.end)
        if first is None or last is None:
            raise SessionError("replace range is not on the surface", code="INVALID_SURFACE_OP")
        if first > last:
            raise SessionError("replace start is after its end", code="INVALID_SURFACE_OP")
        if not set(self._seqs[first : last + 1]).issubset(sources):
            raise SessionError(
                "source_event_seqs must include every replaced node", code="INVALID_SURFACE_OP"
            )
        return first, last

    def _indexed_positions(self) -> dict[int, int]:
        """``_positions`` with the events appended since it was last indexed added."""
        positions, seqs = self._positions, self._seqs
        for index in range(len(positions), len(seqs)):
            positions[seqs[index]] = index
        return positions

    def _splice(self, first: int, last: int, seq: int, projection: Message | None) -> None:
        """Replace the events at indices *first* through *last* with the one at *seq*."""
        seqs, projections = self._seqs, self._projections
        seqs[first : last + 1] = [seq]
        projections[first : last + 1] = [projection]
        self._positions = {kept: index for index, kept in enumerate(seqs)}
        self.generation += 1
        self._messages = [message for message in projections if message is not None]
        self._derived = {}
