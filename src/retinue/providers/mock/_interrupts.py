"""The mock server's listener, and Ctrl-C (or a ``SystemExit``) landing in its connection
tasks or its accept, kept for its caller."""

from __future__ import annotations

import errno
import socket
from collections import deque
from collections.abc import Callable
from typing import NoReturn

import trio

__all__ = ["STARVED_WAIT", "Ending", "WatchedListener", "ending_in", "raise_ending"]

STARVED_WAIT = 0.1
"""Seconds an accept out of descriptors waits for a connection to close: trio's own pause."""

_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


Ending = KeyboardInterrupt | SystemExit
"""What ends the run wherever it lands: Ctrl-C, or a ``SystemExit`` (a policy's, say)."""


def ending_in(error: BaseException) -> Ending | None:
    """*error* if it ends the run, else the first Ctrl-C inside it (a nursery's group),
    else the first ``SystemExit``: Ctrl-C beside one is the user's, and wins."""
    if isinstance(error, Ending):
        return error
    if not isinstance(error, BaseExceptionGroup):
        return None
    for kind in (KeyboardInterrupt, SystemExit):
        leaf: BaseException | None = error.subgroup(kind)
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        if isinstance(leaf, Ending):
            return leaf
    return None


def raise_ending(ending: Ending, failure: BaseException | None) -> NoReturn:
    """Raise *ending*, the block's own *failure* as its context, as Python chains an
    error raised while another is handled. A ``Cancelled`` is left out: the server's
    cancellation of the block, or the caller's, which the ending ends anyway."""
    chained = failure is not None and failure is not ending
    context = failure if chained and not isinstance(failure, trio.Cancelled) else None
    try:
        raise ending
    finally:
        # Raised here, it takes what is being handled (the block's cancel) as its context.
        ending.__context__ = context


class WatchedListener(trio.abc.Listener[trio.SocketStream]):
    """A listener that hands out every queued connection at once, and keeps a Ctrl-C
    (or ``SystemExit``) raised in its accept for *keep*, then raises it.

    Trio's accept takes one connection a scheduler pass. The server shares its
    run with the agents it serves, whose pass grows with their number: a burst
    of a few hundred connections would wait in the listen queue for seconds, and
    their clients time out waiting for response headers. So each accept also
    takes, without waiting, whatever else is queued, and the accepts after it
    hand those out without a pass each. One that ran out of descriptors makes the
    next wait (briefly) for a connection to close, which the server signals on
    *closed*.

    Trio's ``serve_listeners`` closes the listener after a failed accept, at a
    checkpoint: once the server is cancelled, the ``Cancelled`` raised there takes
    the place of Ctrl-C, and the server's cancelled scope swallows it.
    """

    def __init__(
        self,
        listener: trio.SocketListener,
        keep: Callable[[Ending], None],
        closed: trio.lowlevel.ParkingLot,
    ) -> None:
        self._listener = listener
        self._keep = keep
        self._closed = closed
        # The listening socket itself, a second descriptor of it: trio's has no accept
        # that does not wait. Non-blocking, as trio made the socket.
        self._queue = socket.fromfd(
            listener.socket.fileno(), listener.socket.family, socket.SOCK_STREAM
        )
        self._queue.settimeout(0.0)
        self._taken: deque[trio.SocketStream] = deque()
        self._starved = False

    # Protected from Ctrl-C: a SIGINT coming while it runs is handed to the main task, as
    # trio's own code hands it, and never cancels the server before its caller. Its
    # synchronous code, the drain, ends when the listen queue is empty.
    @trio.lowlevel.enable_ki_protection
    async def accept(self) -> trio.SocketStream:
        if self._taken:
            await trio.lowlevel.checkpoint_if_cancelled()
            return self._taken.popleft()
        try:
            return await self._accept_queued()
        except BaseException as exc:
            if (ending := ending_in(exc)) is not None:
                self._keep(ending)
            raise

    async def _accept_queued(self) -> trio.SocketStream:
        """Trio's accept of one connection, then every other queued beside it."""
        if self._starved:
            # The last drain ran out of descriptors: trio's accept would meet the limit
            # again at once, log it and sleep. Waiting for a connection to close frees one.
            self._starved = False
            with trio.move_on_after(STARVED_WAIT):
                await self._closed.park()
        stream = await self._listener.accept()
        try:
            self._take_queued()
        except BaseException:
            # Ctrl-C landing in the drain: the connection is not handed out, nor left open.
            stream.socket.close()
            raise
        return stream

    def _take_queued(self) -> None:
        while True:
            try:
                sock, _ = self._queue.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # Trio's accept meets anything else (a connection reset while queued).
                self._starved = exc.errno in _OUT_OF_DESCRIPTORS
                return
            try:
                self._taken.append(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
            except BaseException:
                sock.close()  # Ctrl-C landing here: closed, not left to the collector
                raise

    async def aclose(self) -> None:
        # Closed at once, not each at a checkpoint a cancel could cut short.
        self._queue.close()
        while self._taken:
            self._taken.popleft().socket.close()
        await self._listener.aclose()
