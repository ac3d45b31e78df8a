"""What a step's events say of each other, which a loaded log is held to (R7.36, R9.10, R4.15,
R9.17).

A session checks each event it is given against the open turn and step
(R4.13, R4.14), not against the step's other events: the loop alone logs a
step's chunks, its message sourced from exactly them, the tool calls that
message lists and a result for each. A stored log that breaks these was
changed by another hand; a record given a type this version does not know
loads as a plugin event (R4.11), and the step around it would then derive a
history the model never gave. A rewrite of history (a surface ``Replace``,
R4.20) is no output of the open step and is passed by, but a result it
rewrites still names a call made earlier.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from retinue._content import ToolCall
from retinue._errors import SessionError

from ._events import (
    AssistantChunk,
    AssistantMessage,
    Event,
    Replace,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)

__all__ = ["BrokenStepError", "check_step_links"]


class BrokenStepError(SessionError):
    """A step's events disagree; ``seq`` is the event that shows it."""

    code = "BROKEN_INVARIANT"

    def __init__(self, event: Event, rule: str, detail: str) -> None:
        super().__init__(f"seq {event.seq} ({event.type}): {rule}: {detail}")
        self.seq = event.seq


def check_step_links(events: Iterable[Event]) -> None:
    """Refuse *events*, a log a session took, unless each step's events agree; one pass.

    A log may end inside a step: its calls may still lack results.

    Raises:
        BrokenStepError: naming the event's seq and type and the rule.
    """
    step = _Step()
    called: set[str] = set()
    for event in events:
        data = event.data
        if isinstance(event.surface_op, Replace):
            if isinstance(data, ToolResultEvent) and data.call_id not in called:
                raise BrokenStepError(
                    event, "R4.15", f"tool/result {data.call_id!r} has no earlier tool/call"
                )
        elif isinstance(data, StepStart | StepEnd | TurnStart | TurnEnd):
            step.settle(event)
            step = _Step()
        elif isinstance(data, AssistantChunk):
            step.chunk(event)
        elif isinstance(data, AssistantMessage):
            step.message(event, data)
        elif isinstance(data, ToolCallEvent):
            step.call(event, data)
            called.add(data.call_id)
        elif isinstance(data, ToolResultEvent):
            step.answer(event, data, called)


@attrs.define(eq=False)
class _Step:
    """The open step's output so far: its chunks, its message, its calls and their results."""

    chunk_seqs: list[int] = attrs.field(factory=list)
    message_seq: int | None = None
    positions: dict[str, int] = attrs.field(factory=dict)
    """Each call id's place among the tool-call blocks of the step's message."""
    pending: dict[str, int] = attrs.field(factory=dict)
    """The seq of each call logged and not yet answered."""
    answered: set[str] = attrs.field(factory=set)
    last_position: int = -1

    def chunk(self, event: Event) -> None:
        if self.message_seq is not None:
            detail = f"assistant/chunk after the step's assistant/message (seq {self.message_seq})"
            raise BrokenStepError(event, "R7.36", detail)
        self.chunk_seqs.append(event.seq)

    def message(self, event: Event, data: AssistantMessage) -> None:
        if self.message_seq is not None:
            detail = f"a second assistant/message in the step (the first at seq {self.message_seq})"
            raise BrokenStepError(event, "R7.36", detail)
        self.message_seq = event.seq
        calls = (block.id for block in data.content if isinstance(block, ToolCall))
        for position, call_id in enumerate(calls):
            self.positions.setdefault(call_id, position)
        sources = event.source_event_seqs
        logged = None if sources is None else list(sources)
        expected = self.chunk_seqs or None
        if logged != expected:
            detail = f"source_event_seqs {logged} are not the step's chunk seqs {expected}"
            raise BrokenStepError(event, "R7.36", detail)

    def call(self, event: Event, data: ToolCallEvent) -> None:
        call_id = data.call_id
        if call_id not in self.positions:
            where = (
                "before the step's assistant/message"
                if self.message_seq is None
                else "not among the tool calls of the step's assistant/message "
                f"(seq {self.message_seq})"
            )
            raise BrokenStepError(event, "R9.10", f"tool/call {call_id!r} {where}")
        if call_id in self.pending or call_id in self.answered:
            raise BrokenStepError(
                event, "R4.15", f"tool/call {call_id!r}: duplicate call id in step"
            )
        self.pending[call_id] = event.seq

    def answer(self, event: Event, data: ToolResultEvent, called: set[str]) -> None:
        call_id = data.call_id
        call_seq = self.pending.pop(call_id, None)
        if call_seq is None:
            if call_id in self.answered:
                problem = ": the call is already answered"
            elif call_id in called:
                problem = f" has no tool/call in step {data.step}"
            else:
                problem = " has no earlier tool/call"
            raise BrokenStepError(event, "R4.15", f"tool/result {call_id!r}{problem}")
        self.answered.add(call_id)
        sources = event.source_event_seqs
        # A synthetic result may not know its call's seq (R11.9): only one naming it is checked.
        if sources is not None and tuple(sources) != (call_seq,):
            detail = (
                f"tool/result {call_id!r} has source_event_seqs {list(sources)}, not [{call_seq}]"
            )
            raise BrokenStepError(event, "R9.17", detail)
        position = self.positions[call_id]
        if position < self.last_position:
            detail = f"tool/result {call_id!r} after the result of a call the message lists later"
            raise BrokenStepError(event, "R9.17", detail)
        self.last_position = position

    def settle(self, event: Event) -> None:
        """At a step or turn boundary every call of the step has its result (R4.15)."""
        if self.pending:
            call_id, seq = next(iter(self.pending.items()))
            raise BrokenStepError(
                event, "R4.15", f"tool/call {call_id!r} (seq {seq}) has no result"
            )
