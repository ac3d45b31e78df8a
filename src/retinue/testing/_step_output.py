"""What the open step of a walked log has logged: its chunks and its assistant message (R7.36)."""

from __future__ import annotations

import attrs

from retinue.session import AssistantChunk, AssistantMessage, Event

from ._invariant import fail

__all__ = ["StepOutput"]


@attrs.define(eq=False)
class StepOutput:
    """The model output of one step: its ``assistant/chunk`` seqs, then its message.

    The loop logs every chunk of the step's one model call, then at most one
    ``assistant/message`` whose ``source_event_seqs`` are exactly those chunk
    seqs, omitted when no chunk streamed (R7.36).
    """

    chunk_seqs: list[int] = attrs.field(factory=list)
    message_seq: int | None = None

    def feed(self, event: Event) -> None:
        """Take an event of the step; a rewrite of history (R4.20) is no output of it."""
        data = event.data
        if isinstance(data, AssistantChunk):
            self._chunk(event)
        elif isinstance(data, AssistantMessage):
            self._message(event)

    def _chunk(self, event: Event) -> None:
        if self.message_seq is not None:
            raise fail(
                event,
                "R7.36",
                f"assistant/chunk after the step's assistant/message (seq {self.message_seq})",
            )
        self.chunk_seqs.append(event.seq)

    def _message(self, event: Event) -> None:
        if self.message_seq is not None:
            raise fail(
                event,
                "R7.36",
                f"a second assistant/message in the step (the first at seq {self.message_seq})",
            )
        self.message_seq = event.seq
        sources = event.source_event_seqs
        logged = None if sources is None else list(sources)
        expected = self.chunk_seqs or None
        if logged != expected:
            raise fail(
                event,
                "R7.36",
                f"source_event_seqs {logged} are not the step's chunk seqs {expected}",
            )
