"""What a turn answers the prompts of its batch (each ``ask``'s result)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retinue.mailbox import MailboxItem
from retinue.session import TurnEndReason

from ._core import TurnResult, settle

__all__ = ["rejected", "settle_batch"]


def settle_batch(
    items: Sequence[MailboxItem], result: TurnResult, blocked: Mapping[int, str] | None
) -> None:
    """Answer a turn's batch: each prompt *blocked* names ``rejected`` with its own reason,
    the rest with *result* (a blocked prompt's asker gets no answer to another's)."""
    if blocked is None:
        settle(items, result)
        return
    for index, item in enumerate(items):
        reason = blocked.get(index)
        if reason is None:
            settle((item,), result)
        else:
            settle((item,), TurnResult(result.turn, rejected(reason)))


def rejected(reason: str | None) -> TurnEndReason:
    """A blocked prompt's end: its block's reason, or the fallback of one given none (R7.12)."""
    return TurnEndReason.rejected(reason or "prompt blocked by hook")
