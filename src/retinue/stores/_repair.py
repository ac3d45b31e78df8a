"""Crash-tail repair (R11.9): synthetic closers for a log that ends inside a turn."""

from __future__ import annotations

from collections.abc import Sequence

from retinue._content import Text, ToolCall
from retinue.session import (
    AssistantMessage,
    Event,
    Replace,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
)

__all__ = ["closing_events", "repair_tail"]

INTERRUPTED_TEXT = "Error: a crash interrupted this tool call before it returned a result"


def closing_events(
    events: Sequence[Event],
    reason: TurnEndReason,
    *,
    error: ToolErrorInfo,
    text: str,
) -> list[Event]:
    """Return the events that close an open turn at the end of *events* (seqs continue).

    Every tool call of the open step without a result gets an error result; a
    call whose ``tool/call`` record is missing (it never started) gets that
    record first, so every result follows its call (R4.15, R9.21). An event
    logged with a surface replace rewrites history (R4.20): it makes no call
    and answers none.
    """
    state = _OpenTurn.scan(events)
    if state is None:
        return []
    closers: list[Event] = []
    stamp = events[-1].time if events else 0
    for call in state.unanswered:
        call_seq = state.call_seqs.get(call.id)
        if call_seq is None:
            call_seq = len(events) + len(closers)
            record = ToolCallEvent(state.turn, state.step, call.id, call.name, call.arguments)
            closers.append(Event(seq=call_seq, time=stamp, data=record))
        result = ToolResultEvent(
            state.turn, state.step, call.id, (Text(text),), is_error=True, error=error
        )
        closers.append(
            Event(
                seq=len(events) + len(closers),
                time=stamp,
                data=result,
                source_event_seqs=(call_seq,),
                surface_op="append",
            )
        )
    seq = len(events) + len(closers)
    if state.step_open:
        closers.append(Event(seq=seq, time=stamp, data=StepEnd(state.turn, state.step)))
        seq += 1
    closers.append(Event(seq=seq, time=stamp, data=TurnEnd(state.turn, reason)))
    return closers


def repair_tail(events: Sequence[Event]) -> list[Event]:
    """Closers for a crashed final turn: error results, ``step/end``, ``turn/end{interrupted}``."""
    return closing_events(
        events,
        TurnEndReason.interrupted(),
        error=ToolErrorInfo("InterruptedError", "interrupted"),
        text=INTERRUPTED_TEXT,
    )


class _OpenTurn:
    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.step = 0
        self.step_open = False
        self.pending: dict[str, ToolCall] = {}
        self.call_seqs: dict[str, int] = {}

    @property
    def unanswered(self) -> list[ToolCall]:
        return list(self.pending.values())

    @classmethod
    def scan(cls, events: Sequence[Event]) -> _OpenTurn | None:
        """The turn *events* end inside, folded; ``None`` if they end outside one.

        Only the last turn can be open: it is found walking back from the end, and
        only what follows its start is folded, so a restart or a load of a long
        session does not read every turn before it again.
        """
        for start in range(len(events) - 1, -1, -1):
            data = events[start].data
            if isinstance(data, TurnEnd):
                return None
            if isinstance(data, TurnStart):
                state = cls(data.turn)
                for index in range(start + 1, len(events)):
                    state.fold(events[index])
                return state
        return None

    def fold(self, event: Event) -> None:
        data = event.data
        if isinstance(event.surface_op, Replace):
            # A rewrite of history (pruning, compaction: R4.20) keeps the calls it
            # rewrites, or the results: it makes no call of the open step, nor answers one.
            return
        if isinstance(data, StepStart):
            self.step, self.step_open = data.step, True
            self.pending, self.call_seqs = {}, {}
        elif isinstance(data, StepEnd):
            self.step_open = False
            self.pending, self.call_seqs = {}, {}
        elif isinstance(data, AssistantMessage):
            for block in data.content:
                if isinstance(block, ToolCall):
                    self.pending[block.id] = block
        elif isinstance(data, ToolCallEvent):
            self.call_seqs[data.call_id] = event.seq
        elif isinstance(data, ToolResultEvent):
            self.pending.pop(data.call_id, None)
