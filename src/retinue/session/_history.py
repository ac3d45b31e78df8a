"""The surface (history view) and derive_messages projection (SPEC 4.5, 5)."""

from __future__ import annotations

import json

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

__all__ = ["Surface", "project"]


def _envelope(tag: str, kind: str, content: tuple[ContentBlock, ...]) -> Message:
    opening = Text(f"<{tag} source={json.dumps(kind)}>")
    return Message("user", (opening, *content, Text(f"</{tag}>")))


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


@attrs.define(eq=False, slots=True)
class _Node:
    seq: int
    message: Message | None
    prev: _Node | None = None
    next: _Node | None = None


@attrs.define(eq=False)
class Surface:
    """The ordered surface of a session, maintained incrementally (R4.19-R4.21).

    Appends are O(1). A replace unlinks the replaced range and rebuilds the
    projection list once; snapshots taken earlier keep their old list.
    """

    _nodes: dict[int, _Node] = attrs.field(factory=dict)
    _head: _Node | None = None
    _tail: _Node | None = None
    _messages: list[Message] = attrs.field(factory=list)
    generation: int = 0

    def check(self, event: Event) -> None:
        """Raise :class:`SessionError` if *event*'s surface op cannot apply; never mutates."""
        op = event.surface_op
        if isinstance(op, Replace):
            self._replaced_range(op, event.source_event_seqs or ())

    def apply(self, event: Event) -> None:
        """Apply *event*'s surface op; call :meth:`check` first."""
        op = event.surface_op
        node = _Node(event.seq, project(event))
        if isinstance(op, Replace):
            first, last = self._replaced_range(op, event.source_event_seqs or ())
            self._splice(first, last, node)
            return
        self._link_tail(node)
        if node.message is not None:
            self._messages.append(node.message)

    def snapshot(self) -> MessageHistory:
        """Return the current history as an immutable view; O(1)."""
        return MessageHistory(self._messages, len(self._messages))

    def _link_tail(self, node: _Node) -> None:
        self._nodes[node.seq] = node
        node.prev = self._tail
        if self._tail is None:
            self._head = node
        else:
            self._tail.next = node
        self._tail = node

    def _replaced_range(self, op: Replace, sources: tuple[int, ...]) -> tuple[_Node, _Node]:
        first = self._nodes.get(op.start)
        last = self._nodes.get(op.end)
        if first is None or last is None:
            raise SessionError("replace range is not on the surface", code="INVALID_SURFACE_OP")
        covered: set[int] = set()
        node: _Node | None = first
        while node is not None:
            covered.add(node.seq)
            if node is last:
                break
            node = node.next
        else:
            raise SessionError("replace start is after its end", code="INVALID_SURFACE_OP")
        if not covered.issubset(sources):
            raise SessionError(
                "source_event_seqs must include every replaced node", code="INVALID_SURFACE_OP"
            )
        return first, last

    def _splice(self, first: _Node, last: _Node, node: _Node) -> None:
        cursor: _Node | None = first
        while cursor is not None:
            del self._nodes[cursor.seq]
            if cursor is last:
                break
            cursor = cursor.next
        node.prev, node.next = first.prev, last.next
        if node.prev is None:
            self._head = node
        else:
            node.prev.next = node
        if node.next is None:
            self._tail = node
        else:
            node.next.prev = node
        self._nodes[node.seq] = node
        self.generation += 1
        self._messages = self._rebuild()

    def _rebuild(self) -> list[Message]:
        messages: list[Message] = []
        node = self._head
        while node is not None:
            if node.message is not None:
                messages.append(node.message)
            node = node.next
        return messages
