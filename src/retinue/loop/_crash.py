"""A driver crash's batch: the prompts it left unanswered, and the answer the log gives them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

import attrs

from retinue._errors import describe_failure
from retinue.mailbox import MailboxItem
from retinue.session import Session, TurnEnd, TurnEndReason, TurnStart

from ._answers import settle_batch
from ._core import TurnResult, settle
from ._summary import summarize_turn

__all__ = ["CrashedBatch", "answer_crashed", "crash_reason"]


@final
@attrs.frozen
class CrashedBatch:
    """The prompts of a turn a driver crash cut short, left to the supervisor to answer
    once it has closed the turn in the log and flushed it (DESIGN 4, R7.49)."""

    items: tuple[MailboxItem, ...]
    turn: int = 0
    """The turn logged for them; 0 when the crash came before its ``turn/start``."""
    step: int = 0
    """The step the turn was in, as a turn's own error names it (R7.45); 0 before the first."""
    blocked: Mapping[int, str] | None = None
    """The reason each prompt a prompt-submit listener blocked was, by its place in the batch."""
    interruption: BaseException | None = None
    """What the driver was unwinding when it crashed (a cancel from outside, Ctrl-C), for
    the supervisor to raise again; ``None`` if nothing."""
    failed: TurnEndReason | None = None
    """The error end the turn recorded before the crash (a model's failure, say), which
    the crash's end names; ``None`` if it recorded none."""

    def end_reason(self, error: Exception) -> TurnEndReason:
        """How the turn ends when the crash (*error*) left it open."""
        return crash_reason(error, self.step, self.failed)


def crash_reason(error: Exception, step: int, failed: TurnEndReason | None = None) -> TurnEndReason:
    """How a turn a driver crash cut short in *step* ends, in the log and for its askers.

    A crash's end is always ``DRIVER_CRASH``, for a reader of the log to find; when
    the turn had failed first (*failed*, the error it recorded), the message says so,
    as that failure is what the turn's caller has to mend.
    """
    message = f"driver crashed: {describe_failure(error)}"
    if failed is not None and failed.message is not None:
        code = "" if failed.code is None else f" ({failed.code})"
        message = f"{message}; the turn had failed first: {failed.message}{code}"
    return TurnEndReason.error(step, message, "DRIVER_CRASH")


def answer_crashed(session: Session, batch: CrashedBatch | None, error: Exception) -> None:
    """Answer *batch* with what the log says of its turn: its logged end, text and usage.

    A turn the crash left open in the log (its closing cut short) ends as the
    crash; so does a batch no turn was logged for. Only the crash's own end
    carries *error*: an answer read from the log has none of its run's.
    """
    if batch is None:
        return
    crash = batch.end_reason(error)
    if batch.turn == 0:
        settle(batch.items, TurnResult(0, crash, error=error))
        return
    reason = _logged_end(session, batch.turn) or crash
    text, usage = summarize_turn(session.events, batch.turn)
    result = TurnResult(batch.turn, reason, text, usage, error if reason == crash else None)
    settle_batch(batch.items, result, batch.blocked)


def _logged_end(session: Session, turn: int) -> TurnEndReason | None:
    """The reason of *turn*'s ``turn/end``; ``None`` while it is open.

    Walks back from the end of the log: the turn is the last one, or followed
    only by idle injections logged since.
    """
    for event in reversed(session.events):
        data = event.data
        if isinstance(data, TurnEnd) and data.turn == turn:
            return data.reason
        if isinstance(data, TurnStart) and data.turn == turn:
            return None
    return None
