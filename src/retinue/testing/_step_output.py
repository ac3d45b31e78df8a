"""What the open step of a walked log has logged: its request header (R7.34), its chunks, its
assistant message (R7.36) and the tool calls it starts (R9.10)."""

from __future__ import annotations

import attrs

from retinue._content import ToolCall
from retinue._lossless import shown_short
from retinue.session import AssistantChunk, AssistantMessage, Event, ToolCallEvent

from ._invariant import fail

__all__ = ["StepOutput"]


@attrs.define(eq=False)
class StepOutput:
    """The model output of one step: its ``assistant/chunk`` seqs, then its message.

    The loop logs every chunk of the step's one model call, then at most one
    ``assistant/message`` whose ``source_event_seqs`` are exactly those chunk
    seqs, omitted when no chunk streamed (R7.36). Each ``tool/call`` starts a
    tool-call block of that message, so it follows the message (R9.10). A
    header event the step owes is logged before the model call (R7.34), so
    before any of its output.
    """

    chunk_seqs: list[int] = attrs.field(factory=list)
    message_seq: int | None = None
    listed_calls: dict[str, ToolCall] = attrs.field(factory=dict)
    """The tool-call blocks of the step's assistant message, by id."""

    def feed(self, event: Event) -> None:
        """Take an event of the step; the walk passes no rewrite of history (R4.20), which is
        no output of the step."""
        data = event.data
        if isinstance(data, AssistantChunk):
            self._chunk(event)
        elif isinstance(data, AssistantMessage):
            self._message(event, data)
        elif isinstance(data, ToolCallEvent):
            self._call(event, data)

    def header(self, event: Event) -> None:
        """Take a ``request/header`` or ``request/header-delta`` of the step."""
        output = self.message_seq if not self.chunk_seqs else self.chunk_seqs[0]
        if output is not None:
            raise fail(event, "R7.34", f"{event.type} after the step's model output (seq {output})")

    def _chunk(self, event: Event) -> None:
        if self.message_seq is not None:
            raise fail(
                event,
                "R7.36",
                f"assistant/chunk after the step's assistant/message (seq {self.message_seq})",
            )
        self.chunk_seqs.append(event.seq)

    def _message(self, event: Event, data: AssistantMessage) -> None:
        if self.message_seq is not None:
            raise fail(
                event,
                "R7.36",
                f"a second assistant/message in the step (the first at seq {self.message_seq})",
            )
        self.message_seq = event.seq
        self.listed_calls = {b.id: b for b in data.content if isinstance(b, ToolCall)}
        sources = event.source_event_seqs
        logged = None if sources is None else list(sources)
        expected = self.chunk_seqs or None
        if logged != expected:
            raise fail(
                event,
                "R7.36",
                f"source_event_seqs {logged} are not the step's chunk seqs {expected}",
            )

    def _call(self, event: Event, data: ToolCallEvent) -> None:
        block = self.listed_calls.get(data.call_id)
        if block is not None:
            if (data.name, data.arguments) != (block.name, block.arguments):
                raise fail(
                    event,
                    "R9.10",
                    f"tool/call {data.call_id!r} records {shown_short(data.name)} with "
                    f"{shown_short(data.arguments)}, where the message's block calls "
                    f"{shown_short(block.name)} with {shown_short(block.arguments)}",
                )
            return
        where = (
            "before the step's assistant/message"
            if self.message_seq is None
            else f"not among the tool calls of the step's assistant/message (seq {self.message_seq})"
        )
        raise fail(event, "R9.10", f"tool/call {data.call_id!r} {where}")
