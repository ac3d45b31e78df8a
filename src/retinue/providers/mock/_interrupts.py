"""Ctrl-C landing in the mock server's connection tasks or its accept, kept for its caller."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import trio

__all__ = ["WatchedListener", "interrupt_in", "raise_interrupt"]


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
    chained = failure is not None and failure is not interrupt
    context = failure if chained and not isinstance(failure, trio.Cancelled) else None
    try:
        raise interrupt
    finally:
        # Raised here, it takes what is being handled (the block's cancel) as its context.
        interrupt.__context__ = context


class WatchedListener(trio.abc.Listener[trio.SocketStream]):
    """A listener that keeps a Ctrl-C landing in its accept for *keep*, then raises it.

    Trio's ``serve_listeners`` closes the listener after a failed accept, at a
    checkpoint: once the server is cancelled, the ``Cancelled`` raised there takes
    the place of Ctrl-C, and the server's cancelled scope swallows it.
    """

    def __init__(
        self, listener: trio.SocketListener, keep: Callable[[KeyboardInterrupt], None]
    ) -> None:
        self._listener = listener
        self._keep = keep

    async def accept(self) -> trio.SocketStream:
        try:
            return await self._listener.accept()
        except BaseException as exc:
            if (interrupt := interrupt_in(exc)) is not None:
                self._keep(interrupt)
            raise

    async def aclose(self) -> None:
        await self._listener.aclose()
