"""Summaries of a turn read back from the log (the text and usage ``ask`` returns)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from retinue._content import content_text
from retinue._stream import Aborted, Errored, Finish, FinishReason, StreamChunk, Usage, UsageChunk
from retinue.session import AssistantChunk, AssistantMessage, Event, TurnStart

__all__ = ["add_usage", "summarize_turn"]


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def add_usage(total: Usage | None, usage: Usage) -> Usage:
    """*total* plus *usage*; ``None`` counts as nothing."""
    if total is None:
        return usage
    return Usage(
        input_tokens=total.input_tokens + usage.input_tokens,
        output_tokens=total.output_tokens + usage.output_tokens,
        cache_read_tokens=_plus(total.cache_read_tokens, usage.cache_read_tokens),
        cache_write_tokens=_plus(total.cache_write_tokens, usage.cache_write_tokens),
        reasoning_tokens=_plus(total.reasoning_tokens, usage.reasoning_tokens),
    )


def summarize_turn(events: Sequence[Event], turn: int) -> tuple[str, Usage | None]:
    """Return the last assistant text and the summed usage of *turn*.

    Walks back from the end of the log to the turn's ``turn/start``, so the
    cost is the turn's length, never the session's. A step whose stream ended
    ``finish{error|aborted}`` has no message to carry its usage (R7.36): its
    last usage chunk is counted, as the live turn counts it.
    """
    text: str | None = None
    usage: Usage | None = None
    ends = _StepEnds()
    # Each event class is final, so an exact type check is an isinstance check.
    for event in reversed(events):
        data = event.data
        if type(data) is AssistantMessage:
            if data.turn == turn:
                ends.answered.add(data.step)
                if text is None:
                    text = content_text(data.content) or None
                if data.usage is not None:
                    usage = add_usage(usage, data.usage)
        elif type(data) is AssistantChunk:
            if data.turn == turn:
                ends.read(data.step, data.chunk)
        elif type(data) is TurnStart and data.turn == turn:
            break
    for step_usage in ends.failed_usages():
        usage = add_usage(usage, step_usage)
    return text or "", usage


@attrs.define
class _StepEnds:
    """The last finish and usage chunk of each step, read back to front."""

    answered: set[int] = attrs.field(factory=set)
    finishes: dict[int, FinishReason] = attrs.field(factory=dict)
    usage: dict[int, Usage] = attrs.field(factory=dict)

    def read(self, step: int, chunk: StreamChunk) -> None:
        if type(chunk) is Finish:
            self.finishes.setdefault(step, chunk.reason)
        elif type(chunk) is UsageChunk:
            self.usage.setdefault(step, chunk.usage)

    def failed_usages(self) -> list[Usage]:
        """The usage of each step with no message whose stream ended failed, first step first."""
        return [
            usage
            for step, usage in sorted(self.usage.items())
            if step not in self.answered and isinstance(self.finishes.get(step), (Errored, Aborted))
        ]
