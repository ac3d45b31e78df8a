"""The history a log replays to, folded independently, and its calls paired with results (R5.4)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from retinue._content import Message, ToolCall, ToolResultBlock
from retinue.session import Event, StepEnd, StepStart, TurnEnd, TurnStart, project

from ._invariant import InvariantError
from ._surface import SurfaceWalk

__all__ = ["check_history_calls", "fold_messages"]


def fold_messages(events: Sequence[Event]) -> list[tuple[int, Message]]:
    """An independent fold of the surface (R4.19) and projection (R5.2) over *events*.

    Each message comes with the seq of the event it projects.
    """
    surface = SurfaceWalk()
    projections: dict[int, Message | None] = {}
    for event in events:
        if event.surface_op is not None:
            surface.feed(event)
            projections[event.seq] = project(event)
    return [(seq, message) for seq in surface if (message := projections[seq]) is not None]


def _open_step_start(events: Sequence[Event]) -> int | None:
    """The seq of the ``step/start`` of a step still open at the end of *events*, if any."""
    for event in reversed(events):
        if isinstance(event.data, StepStart):
            return event.seq
        if isinstance(event.data, StepEnd | TurnStart | TurnEnd):
            return None
    return None


def _history_fail(index: int, seq: int, message: str) -> InvariantError:
    return InvariantError(f"history message {index} (seq {seq}): R5.4: {message}")


@attrs.define(eq=False)
class _HistoryCalls:
    """Tool-call blocks of the replayed history still waiting for their result."""

    pending: dict[str, tuple[int, int]] = attrs.field(factory=dict)

    def feed(self, index: int, seq: int, message: Message) -> None:
        if message.role == "assistant":
            # A provider wants a call's result before the model speaks again.
            self.settle()
        for block in message.content:
            if isinstance(block, ToolCall) and message.role == "assistant":
                self._call(index, seq, block.id)
            elif isinstance(block, ToolResultBlock):
                self._answer(index, seq, block.tool_call_id)

    def _call(self, index: int, seq: int, call_id: str) -> None:
        if call_id in self.pending:
            raise _history_fail(index, seq, f"tool call {call_id!r}: duplicate call id")
        self.pending[call_id] = (index, seq)

    def _answer(self, index: int, seq: int, call_id: str) -> None:
        if self.pending.pop(call_id, None) is None:
            raise _history_fail(
                index,
                seq,
                f"tool result {call_id!r} answers no unanswered call of an earlier message",
            )

    def settle(self, open_from: int | None = None) -> None:
        """Fail on a call with no result, except one of the step open from seq *open_from*."""
        for call_id, (index, seq) in self.pending.items():
            if open_from is None or seq < open_from:
                raise _history_fail(index, seq, f"tool call {call_id!r} has no result")
        self.pending.clear()


def check_history_calls(history: Sequence[tuple[int, Message]], events: Sequence[Event]) -> None:
    """Check R5.4 on a replayed history: calls and results pair up one to one.

    Every tool result answers a tool-call block of an earlier assistant
    message, and every call block gets exactly one result before the next
    assistant message; only a step still open at the end of *events* may be
    waiting for results.
    """
    calls = _HistoryCalls()
    for index, (seq, message) in enumerate(history):
        calls.feed(index, seq, message)
    calls.settle(_open_step_start(events))
