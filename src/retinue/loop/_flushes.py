"""What waits on an agent's background flushes: the round in flight and the next one."""

from __future__ import annotations

from typing import final

import attrs
import trio

__all__ = ["FlushRounds"]


@final
@attrs.define(eq=False, slots=True)
class FlushRounds:
    """What waits on an agent's background flushes (R2.21): the round in flight and the next."""

    in_flight: trio.Event | None = None
    """Set when the flush in flight has ended."""
    next: trio.Event | None = None
    """Set when the one requested, not yet begun, has ended."""
    ended: bool = False
    """The flusher is gone: no flush will run or end any more."""

    def waiter(self, *, requested: bool) -> trio.Event | None:
        """An event set once the flush *requested* (not yet begun), else the one in flight, ends.

        ``None`` when there is none, or when the flusher has stopped and none
        will run. A failed or timed-out flush ends too: it is reported, never retried.
        """
        if self.ended:
            return None
        if requested:
            # The request is served by the next round, whatever is in flight now.
            if self.next is None:
                self.next = trio.Event()
            return self.next
        return self.in_flight

    def begin(self) -> None:
        """Start the next round: whoever waited for it now waits for the flush in flight."""
        self.in_flight = trio.Event() if self.next is None else self.next
        self.next = None

    def end_round(self) -> None:
        """The flush in flight has ended."""
        done, self.in_flight = self.in_flight, None
        if done is not None:
            done.set()

    def stop(self) -> None:
        """No flush will run any more: release every waiter."""
        self.ended = True
        for waited in (self.in_flight, self.next):
            if waited is not None:
                waited.set()
