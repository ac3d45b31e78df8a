"""The agent's inbox: a queued FIFO, a steering FIFO and the single driver's wake-up (SPEC 3)."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from operator import itemgetter
from typing import Generic, TypeAlias, TypeVar, final

import attrs
import trio

from retinue._content import ContentBlock
from retinue._sources import MessageSource

__all__ = ["Mailbox", "MailboxItem", "MailboxStatistics", "Ticket"]

T = TypeVar("T")

_Arrival: TypeAlias = tuple[int, "MailboxItem"]
"""An item with its place in the order items reached the mailbox, across both FIFOs."""
_arrival_number = itemgetter(0)


@final
@attrs.define(eq=False)
class Ticket(Generic[T]):
    """Settled once with the outcome of whatever consumed a mailbox item."""

    result: T | None = None
    done: trio.Event = attrs.field(factory=trio.Event)

    def resolve(self, result: T) -> None:
        """Settle the ticket; later calls are ignored. Never blocks."""
        if not self.done.is_set():
            self.result = result
            self.done.set()

    def take(self) -> T | None:
        """The result, handed over and let go of here.

        The item holding this ticket may be held by the frames of a failure the
        result carries (a turn that failed before it opened): kept here, the
        result would close a cycle through them, left to the cyclic collector.
        """
        result, self.result = self.result, None
        return result


@final
@attrs.frozen
class MailboxItem:
    """One queued or steering message."""

    content: tuple[ContentBlock, ...]
    source: MessageSource
    ticket: Ticket[object] | None = attrs.field(default=None, eq=False)


@final
@attrs.frozen
class MailboxStatistics:
    """A snapshot of the mailbox."""

    queued: int
    steering: int
    driver_waiting: bool


@final
@attrs.define(eq=False)
class Mailbox:
    """Two FIFOs; one task at a time waits on it: the agent's driver, or while none runs
    (a restart's pause) the task standing in for it."""

    _queued: deque[_Arrival] = attrs.field(factory=deque, init=False)
    _steering: deque[_Arrival] = attrs.field(factory=deque, init=False)
    # Numbered as they arrive, so leftover steering rejoins the queued items in the
    # order both were sent, not behind a prompt sent after it.
    _arrivals: itertools.count[int] = attrs.field(factory=itertools.count, init=False)
    # The parked driver, rescheduled directly: an Event per wait would cost one
    # object and its bookkeeping per turn, for a single waiter woken once.
    _waiter: trio.lowlevel.Task | None = attrs.field(default=None, init=False)

    def enqueue(self, item: MailboxItem) -> None:
        """Append to the queued FIFO and wake the waiting driver (R3.2); never blocks."""
        self._queued.append((next(self._arrivals), item))
        if self._waiter is not None:
            self.wake()

    def steer(self, item: MailboxItem) -> None:
        """Append to the steering FIFO without waking anyone (R3.3); never blocks."""
        self._steering.append((next(self._arrivals), item))

    def drain_queued(self, limit: int | None = None) -> list[MailboxItem]:
        """Return and remove every queued item, or the first *limit*, in arrival order (R3.4).

        Wakes a task parked in :meth:`wait_for_change` when it takes anything.
        """
        queued = self._queued
        if limit is not None and limit < len(queued):
            items = [queued.popleft()[1] for _ in range(limit)]
        else:
            items = [item for _, item in queued]
            queued.clear()
        # Only a wait_for_change parks while items are queued: the driver's own
        # wait returns as soon as one is, and drains them itself once it runs.
        if items and self._waiter is not None:
            self.wake()
        return items

    def withdraw(self, ticket: Ticket[object]) -> MailboxItem | None:
        """Remove and return the queued item holding *ticket*; ``None`` if none is queued.

        Wakes a task parked in :meth:`wait_for_change`, as a drain does.
        """
        for index, (_, item) in enumerate(self._queued):
            if item.ticket is ticket:
                del self._queued[index]
                # A task parked with items queued is a wait_for_change: the driver's
                # own wait was woken as the item came, and is no waiter since.
                if self._waiter is not None:
                    self.wake()
                return item
        return None

    def drain_steering(self) -> list[MailboxItem]:
        """Return and remove every steering item, in arrival order (R3.4)."""
        items = [item for _, item in self._steering]
        self._steering.clear()
        return items

    @property
    def has_queued(self) -> bool:
        """Whether the queued FIFO is non-empty."""
        return bool(self._queued)

    @property
    def has_steering(self) -> bool:
        """Whether the steering FIFO is non-empty."""
        return bool(self._steering)

    def requeue_steering(self) -> None:
        """Move leftover steering to the queued FIFO so it starts the next turn (R3.10).

        Merged in arrival order: a steer made before a send stays before it.
        """
        steering = self._steering
        if not steering:
            return
        queued = self._queued
        if not queued or queued[-1][0] < steering[0][0]:
            queued.extend(steering)  # the usual case: every queued item came first
        else:
            self._queued = deque(heapq.merge(queued, steering, key=_arrival_number))
        steering.clear()

    def clear(self) -> None:
        """Discard both FIFOs without delivering (R3.6).

        The items' tickets are left unsettled: an agent's cancel and disposal
        drain the FIFOs instead, and answer every ``ask`` they discard.
        """
        self._queued.clear()
        self._steering.clear()

    def wake(self) -> None:
        """Wake the waiting task without queuing anything (used by dispose)."""
        # Cleared once woken: a second wake before it runs must not reschedule it twice,
        # and a wake that failed (off the trio thread) leaves it to a later one.
        task = self._waiter
        if task is not None:
            trio.lowlevel.reschedule(task)
            self._waiter = None

    async def wait_for_queued(self, stop: trio.Event) -> None:
        """Wait until something is enqueued or the wait is woken (R3.7).

        Returns at once if the queued FIFO is non-empty or *stop* is set. A
        parked waiter is woken by an enqueue or by :meth:`wake`; whoever sets
        *stop* later calls :meth:`wake` too (disposal does), since an event
        cannot wake this waiter by itself without a task per wait. An enqueue
        wakes the waiter even if a ``clear`` emptied the FIFO again before it
        ran, so the caller re-checks. Always a checkpoint; cancellation changes nothing.
        Parking happens with no scheduling point before it, so a caller's
        synchronous check just before the call still holds when it parks.
        """
        if self._queued or stop.is_set():
            await trio.lowlevel.checkpoint()
            return
        await trio.lowlevel.wait_task_rescheduled(self._park())

    async def wait_for_change(self, stop: trio.Event) -> None:
        """Wait until something is enqueued, the queued FIFO is drained or an item withdrawn
        from it, or the wait is woken.

        For a task that stands in for the driver while none runs (a restart's
        pause), which must hear a cancel emptying the FIFO. Returns at once if
        *stop* is set; otherwise parks, prompts queued or not, as the mailbox's
        single waiter, which :meth:`wait_for_queued` would replace.
        """
        if stop.is_set():
            await trio.lowlevel.checkpoint()
            return
        await trio.lowlevel.wait_task_rescheduled(self._park())

    def _park(self) -> Callable[[object], trio.lowlevel.Abort]:
        """Make the current task the waiter; the abort function its wait is parked with."""
        # Synchronous, so sharing it adds no coroutine to a park (the driver's, per turn).
        task = self._waiter = trio.lowlevel.current_task()
        return _Withdrawal(self, task)

    def _withdraw(self, task: trio.lowlevel.Task) -> None:
        # A cancelled wait withdraws itself, not a newer waiter that replaced it.
        if self._waiter is task:
            self._waiter = None

    def statistics(self) -> MailboxStatistics:
        """Return a snapshot of queue lengths."""
        return MailboxStatistics(len(self._queued), len(self._steering), self._waiter is not None)


@final
class _Withdrawal:
    """The abort function of a parked wait: withdraws its task from the mailbox.

    One slotted object per park, where a closure is a function, its cells and
    their tuple, which the driver's wait, once a turn, would hold for the cyclic
    collector to traverse.
    """

    __slots__ = ("_mailbox", "_task")

    def __init__(self, mailbox: Mailbox, task: trio.lowlevel.Task) -> None:
        self._mailbox = mailbox
        self._task = task

    def __call__(self, _: object) -> trio.lowlevel.Abort:
        self._mailbox._withdraw(self._task)
        return trio.lowlevel.Abort.SUCCEEDED
