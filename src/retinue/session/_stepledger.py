"""What a step may log after what it logged already (R7.34, R7.36, R9.10, R4.15, R9.17, R9.25).

A step logs its request header (if it owes one), then its model output: the
stream's chunks and at most one ``assistant/message``, sourced from exactly
those chunks. A ``tool/call`` follows for a tool-call block of that message,
and one ``tool/result`` for each call, pointing at it, in the order the
message lists the calls, every call answered before the step's ``step/end``. The loop logs
no other shape, ``sessions import`` and the invariant checkers refuse any
other, and so does a session's append: a log a session holds can always be
copied to another store.

A load checks none of it: a stored log is read as it was written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import attrs

from retinue._content import ToolCall
from retinue._errors import SessionError

from ._events import (
    AssistantChunk,
    AssistantMessage,
    Event,
    EventData,
    Replace,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
)

__all__ = ["StepLedger"]

_OUTPUT_TYPES = (AssistantChunk, AssistantMessage)


def _refuse(message: str, code: str) -> NoReturn:
    raise SessionError(message, code=code)


@attrs.define(eq=False)
class StepLedger:
    """The open step's output so far: its message, its calls and their results.

    One per session, reset at each ``step/start``. The loop's own appends
    keep every rule, so a refusal here is a plugin's append out of place.
    """

    start: int = 0
    """The seq of the open step's ``step/start``."""
    message: int | None = None
    """The seq of the step's ``assistant/message``, once logged."""
    positions: dict[str, int] = attrs.field(factory=dict)
    """Each call id's place among the tool-call blocks of that message."""
    pending: dict[str, int] = attrs.field(factory=dict)
    """The seq of each ``tool/call`` of the step not answered yet."""
    answered: set[str] = attrs.field(factory=set)
    last_position: int = -1
    """The place in the message of the call answered last."""

    def open(self, seq: int) -> None:
        """A step opens at *seq*."""
        self.start = seq
        self.message = None
        self.last_position = -1
        if self.positions:
            self.positions = {}
        if self.answered:
            self.answered.clear()
        if self.pending:  # only after a load cut inside a step: a step ends with none
            self.pending.clear()

    def admit(self, events: Sequence[Event], data: EventData, event: Event) -> None:
        """Refuse *event* (with *data*, to be logged after *events*) unless the open step
        may log it next; record it if so. Only what a step logs is looked at."""
        kind = type(data)
        if isinstance(event.surface_op, Replace):
            return  # a rewrite of history (R4.20) is no output of the step
        if kind is StepStart:
            self.open(len(events))
        elif kind is StepEnd:
            self.close()
        elif kind is ToolCallEvent:
            self.call(data, len(events))  # type: ignore[arg-type]
        elif kind is ToolResultEvent:
            self.result(data, event.source_event_seqs)  # type: ignore[arg-type]
        elif kind is AssistantMessage:
            self.take_message(events, data, event.source_event_seqs)  # type: ignore[arg-type]
        elif kind is AssistantChunk and self.message is not None:
            _refuse(
                f"assistant/chunk after the step's assistant/message (seq {self.message})",
                "STEP_OUTPUT",
            )

    def take_message(
        self,
        events: Sequence[Event],
        data: AssistantMessage,
        sources: Sequence[int] | None,
        *,
        vouched: bool = False,
    ) -> None:
        """An ``assistant/message`` *data* at ``len(events)`` sourced from *sources* (R7.36).

        *vouched*: the caller (the loop, or a load's rebuild) answers for the sources
        being the step's chunks and the tool-call ids being distinct; else both are checked.
        """
        if self.message is not None:
            _refuse(
                f"a second assistant/message in the step (the first at seq {self.message})",
                "STEP_OUTPUT",
            )
        if not vouched:
            self._check_sources(events, sources)
        positions = _positions(data, refuse_twice=not vouched)
        self.message = len(events)
        if positions is not None:
            self.positions = positions

    def _check_sources(self, events: Sequence[Event], sources: Sequence[int] | None) -> None:
        chunks = [event[0] for event in events[self.start :] if type(event[2]) is AssistantChunk]
        if (tuple(chunks) if chunks else None) != (None if sources is None else tuple(sources)):
            _refuse(
                f"assistant/message sourced from {None if sources is None else list(sources)}, "
                f"not from the step's chunks {chunks or None}",
                "STEP_OUTPUT",
            )

    def call(self, data: ToolCallEvent, seq: int) -> None:
        """A ``tool/call`` at *seq*: a call of the step's message, made once (R9.10, R4.15)."""
        call_id = data.call_id
        if call_id not in self.positions:
            where = (
                "before the step's assistant/message"
                if self.message is None
                else f"not among the tool calls of the step's assistant/message (seq {self.message})"
            )
            _refuse(f"tool/call {call_id!r} {where}", "STEP_OUTPUT")
        if call_id in self.pending or call_id in self.answered:
            _refuse(f"tool/call {call_id!r}: the step made this call already", "STEP_OUTPUT")
        self.pending[call_id] = seq

    def result(self, data: ToolResultEvent, sources: Sequence[int] | None) -> None:
        """A ``tool/result``: one per call of the step, pointing at it, in model order (R4.15,
        R9.17)."""
        call_id = data.call_id
        call_seq = self.pending.get(call_id)
        if call_seq is None:
            made = "is answered already" if call_id in self.answered else "was not made in the step"
            _refuse(f"tool/result {call_id!r}: the call {made}", "CALL_RESULTS")
        if sources is not None and (len(sources) != 1 or sources[0] != call_seq):
            _refuse(
                f"tool/result {call_id!r} sourced from {list(sources)}, not [{call_seq}], its call",
                "CALL_RESULTS",
            )
        position = self.positions[call_id]
        if position < self.last_position:
            _refuse(
                f"tool/result {call_id!r} (call {position} of the assistant message) after the "
                f"result of call {self.last_position}: results follow the model's order",
                "CALL_RESULTS",
            )
        del self.pending[call_id]
        self.answered.add(call_id)
        self.last_position = position

    def close(self) -> None:
        """The step ends: every tool call of its message is answered (R4.15, R9.25)."""
        if len(self.answered) != len(self.positions):
            call_id = next(call_id for call_id in self.positions if call_id not in self.answered)
            made = self.pending.get(call_id)
            called = "never called" if made is None else f"called at seq {made}"
            _refuse(
                f"step/end with tool call {call_id!r} of the step's assistant/message "
                f"(seq {self.message}) unanswered ({called})",
                "CALL_RESULTS",
            )

    def header(self, events: Sequence[Event], data: EventData) -> None:
        """A request header logged inside the open step: before its model output (R7.34)."""
        for event in events[self.start :]:
            # A rewrite of history (R4.20) is no output of the step.
            if type(event[2]) in _OUTPUT_TYPES and not isinstance(event.surface_op, Replace):
                _refuse(
                    f"{data.type} after the step's model output (seq {event[0]})", "STEP_OUTPUT"
                )

    def rebuild(self, events: Sequence[Event]) -> None:
        """Take the open step of a loaded log as it reads, refusing nothing.

        Read so its closing events (a crash repair's results) are admitted:
        results may follow in model order from the first call unanswered.
        """
        start = len(events) - 1
        while start > 0 and type(events[start][2]) is not StepStart:
            start -= 1
        self.open(start)
        for event in events[start:]:
            data = event[2]
            if isinstance(event.surface_op, Replace):
                continue
            if type(data) is AssistantMessage and self.message is None:
                self.message = event[0]
                self.positions = _positions(data, refuse_twice=False) or {}
            elif type(data) is ToolCallEvent:
                self.positions.setdefault(data.call_id, len(self.positions))
                self.pending[data.call_id] = event[0]
            elif type(data) is ToolResultEvent and self.pending.pop(data.call_id, None) is not None:
                self.answered.add(data.call_id)


def _positions(data: AssistantMessage, *, refuse_twice: bool) -> dict[str, int] | None:
    """Each tool call's place among *data*'s tool-call blocks (``None`` for none); a loop
    rather than a comprehension, one call fewer a step. An id given twice is refused
    (one call and one result would answer both, R4.15) or, read leniently, placed first."""
    positions: dict[str, int] | None = None
    index = 0
    for block in data.content:
        if type(block) is ToolCall:
            if positions is None:
                positions = {}
            elif refuse_twice and block.id in positions:
                _refuse(f"tool call {block.id!r} twice in the assistant/message", "STEP_OUTPUT")
            positions.setdefault(block.id, index)
            index += 1
    return positions
