"""The mock server's listener, and Ctrl-C landing in its connection tasks or its accept,
kept for its caller."""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Callable
from socket import SOCK_STREAM
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
    """A listener that hands out every queued connection at once, and keeps a Ctrl-C
    landing in its accept for *keep*, then raises it.

    Trio's accept takes one connection a scheduler pass. The server shares its
    run with the agents it serves, whose pass grows with their number: a burst
    of a few hundred connections would wait in the listen queue for seconds, and
    their clients time out waiting for response headers. So each accept also
    takes, without waiting, whatever else is queued, and the accepts after it
    hand those out without a pass each.

    Trio's ``serve_listeners`` closes the listener after a failed accept, at a
    checkpoint: once the server is cancelled, the ``Cancelled`` raised there takes
    the place of Ctrl-C, and the server's cancelled scope swallows it.
    """

    def __init__(
        self, listener: trio.SocketListener, keep: Callable[[KeyboardInterrupt], None]
    ) -> None:
        self._listener = listener
        self._keep = keep
        # The listening socket itself, a second descriptor of it: trio's has no accept
        # that does not wait. Non-blocking, as trio made the socket.
        self._queue = socket.fromfd(listener.socket.fileno(), listener.socket.family, SOCK_STREAM)
        self._queue.settimeout(0.0)
        self._taken: deque[trio.SocketStream] = deque()

    async def accept(self) -> trio.SocketStream:
        if self._taken:
            await trio.lowlevel.checkpoint_if_cancelled()
            return self._taken.popleft()
        try:
            stream = await self._listener.accept()
        except BaseException as exc:
            if (interrupt := interrupt_in(exc)) is not None:
                self._keep(interrupt)
            raise
        self._take_queued()
        return stream

    def _take_queued(self) -> None:
        while True:
            try:
                sock, _ = self._queue.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                # The next accept meets it (a connection reset while queued, the
                # descriptor limit) as trio's accept handles it.
                return
            self._taken.append(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))

    async def aclose(self) -> None:
        # Closed at once, not each at a checkpoint a cancel could cut short.
        self._queue.close()
        while self._taken:
            self._taken.popleft().socket.close()
        await self._listener.aclose()
