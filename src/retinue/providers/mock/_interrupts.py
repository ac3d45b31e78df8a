"""Ctrl-C landing in one of the mock server's connection tasks, kept for its caller."""

from __future__ import annotations

from typing import NoReturn

import trio

__all__ = ["interrupt_in", "raise_interrupt"]


def interrupt_in(error: BaseException) -> KeyboardInterrupt | None:
    """*error* if it is Ctrl-C, else the first Ctrl-C inside it (a nursery's group), if any."""
    if isinstance(error, KeyboardInterrupt):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if (interrupt := interrupt_in(inner)) is not None:
                return interrupt
    return None


def raise_interrupt(interrupt: KeyboardInterrupt, failure: BaseException | None) -> NoReturn:
    """Raise *interrupt*, the block's own *failure* as its context, as Python chains an
    error raised while another is handled. A ``Cancelled`` is left out: the server's
    cancellation of the block, or the caller's, which Ctrl-C ends anyway."""
    if failure is not None and failure is not interrupt and not isinstance(failure, trio.Cancelled):
        interrupt.__context__ = failure
    raise interrupt
