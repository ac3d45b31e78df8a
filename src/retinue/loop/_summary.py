"""What ``ask`` returns about a turn: its last assistant text and summed usage."""

from __future__ import annotations

import attrs

from retinue._content import content_text
from retinue._stream import Usage
from retinue.session import AssistantMessage

__all__ = ["TurnSummary", "add_usage"]


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def add_usage(total: Usage | None, usage: Usage) -> Usage:
    """The field-wise sum of two usages; optional counts stay ``None`` only if both are."""
    if total is None:
        return usage
    return Usage(
        input_tokens=total.input_tokens + usage.input_tokens,
        output_tokens=total.output_tokens + usage.output_tokens,
        cache_read_tokens=_plus(total.cache_read_tokens, usage.cache_read_tokens),
        cache_write_tokens=_plus(total.cache_write_tokens, usage.cache_write_tokens),
        reasoning_tokens=_plus(total.reasoning_tokens, usage.reasoning_tokens),
    )


@attrs.define(eq=False, slots=True)
class TurnSummary:
    """Folded from the turn's logged assistant messages as they are appended.

    Kept alongside the log rather than read back from it, so settling a turn
    costs nothing per event of the turn.
    """

    text: str = ""
    usage: Usage | None = None

    def add(self, message: AssistantMessage) -> None:
        """Fold one logged assistant message: the last non-empty text wins, usage sums."""
        text = content_text(message.content)
        if text:
            self.text = text
        if message.usage is not None:
            self.usage = add_usage(self.usage, message.usage)
