"""Summaries of a turn read back from the log (the text and usage ``ask`` returns)."""

from __future__ import annotations

from collections.abc import Sequence

from retinue._content import content_text
from retinue._stream import Usage
from retinue.session import AssistantMessage, Event, TurnStart

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
    cost is the turn's length, never the session's.
    """
    text: str | None = None
    usage: Usage | None = None
    # Both event classes are final, so an exact type check is an isinstance check.
    for event in reversed(events):
        data = event.data
        if type(data) is AssistantMessage:
            if data.turn == turn:
                if text is None:
                    text = content_text(data.content) or None
                if data.usage is not None:
                    usage = add_usage(usage, data.usage)
        elif type(data) is TurnStart and data.turn == turn:
            break
    return text or "", usage
