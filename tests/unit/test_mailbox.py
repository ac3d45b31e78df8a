"""The mailbox: two FIFOs and the single driver's wake-up (SPEC 3, R3.2-R3.7).

Waits run on the autojump clock under a virtual deadline: a lost wake-up fails
in zero real time instead of hanging.
"""

from __future__ import annotations

import trio
import trio.testing

from retinue import MessageSource
from retinue._content import as_content
from retinue.mailbox import Mailbox, MailboxItem, Ticket
from tests.helpers import DEADLINE

USER = MessageSource()


def item(text: str) -> MailboxItem:
    return MailboxItem(as_content(text), USER)


def texts(items: list[MailboxItem]) -> list[str]:
    return [i.content[0].text for i in items]  # type: ignore[union-attr]


def test_mailbox_drains_each_fifo_in_arrival_order_and_empties_it() -> None:
    """R3.4, R3.5: drain returns every item in order, leaves that FIFO empty and the other untouched."""
    mailbox = Mailbox()
    assert not mailbox.has_queued
    assert not mailbox.has_steering
    for text in ("a", "b", "c"):
        mailbox.enqueue(item(text))
    mailbox.steer(item("s1"))
    mailbox.steer(item("s2"))
    assert mailbox.has_queued
    assert mailbox.has_steering
    assert texts(mailbox.drain_queued()) == ["a", "b", "c"]
    assert not mailbox.has_queued
    assert mailbox.has_steering
    assert mailbox.drain_queued() == []
    assert texts(mailbox.drain_steering()) == ["s1", "s2"]
    assert not mailbox.has_steering
    assert mailbox.statistics().queued == mailbox.statistics().steering == 0


def test_ticket_keeps_its_first_result() -> None:
    """DESIGN 3 (``ask -> TurnResult``): a ticket is settled once; a later answer is ignored."""
    ticket: Ticket[str] = Ticket()
    assert not ticket.done.is_set()
    assert ticket.result is None
    ticket.resolve("turn ended in error")
    assert ticket.done.is_set()
    ticket.resolve("disposed")
    assert ticket.result == "turn ended in error"
    assert ticket.done.is_set()


def test_mailbox_clear_discards_both_fifos() -> None:
    """R3.6: clear drops queued and steering items without delivering them."""
    mailbox = Mailbox()
    mailbox.enqueue(item("q"))
    mailbox.steer(item("s"))
    mailbox.clear()
    assert not mailbox.has_queued
    assert not mailbox.has_steering
    assert mailbox.drain_queued() == mailbox.drain_steering() == []


def test_mailbox_requeue_moves_steering_behind_queued_prompts() -> None:
    """R3.10: leftover steering joins the queued FIFO after the prompts queued before it, in order."""
    mailbox = Mailbox()
    mailbox.enqueue(item("q"))
    mailbox.steer(item("s1"))
    mailbox.steer(item("s2"))
    mailbox.requeue_steering()
    assert not mailbox.has_steering
    assert texts(mailbox.drain_queued()) == ["q", "s1", "s2"]


def test_mailbox_requeue_keeps_a_steer_before_a_prompt_sent_after_it() -> None:
    """R3.4, R3.10: leftover steering rejoins the queued FIFO in arrival order across both
    FIFOs: a steer made before a send stays before it, behind what was queued earlier."""
    mailbox = Mailbox()
    mailbox.enqueue(item("q1"))
    mailbox.steer(item("s1"))
    mailbox.enqueue(item("q2"))
    mailbox.steer(item("s2"))
    mailbox.requeue_steering()
    assert texts(mailbox.drain_queued()) == ["q1", "s1", "q2", "s2"]


async def test_mailbox_wait_returns_at_once_when_something_is_queued() -> None:
    """R3.7: with queued items the wait returns immediately (still a checkpoint)."""
    mailbox = Mailbox()
    mailbox.enqueue(item("ready"))
    with trio.testing.assert_checkpoints():
        await mailbox.wait_for_queued(trio.Event())
    assert mailbox.has_queued


async def test_mailbox_wait_returns_at_once_when_stopped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.7: a stop event already set ends the wait immediately (a parked wait fails, not hangs)."""
    stop = trio.Event()
    stop.set()
    with trio.fail_after(1), trio.testing.assert_checkpoints():
        await Mailbox().wait_for_queued(stop)


async def test_mailbox_enqueue_wakes_the_waiter(autojump_clock: trio.testing.MockClock) -> None:
    """R3.2, R3.7: an empty mailbox parks the waiter until an enqueue."""
    mailbox = Mailbox()
    woke = trio.Event()

    async def waiter() -> None:
        await mailbox.wait_for_queued(trio.Event())
        woke.set()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert mailbox.statistics().driver_waiting
            assert not woke.is_set()
            mailbox.enqueue(item("go"))
            await woke.wait()
    assert not mailbox.statistics().driver_waiting
    assert texts(mailbox.drain_queued()) == ["go"]


async def test_mailbox_steer_does_not_wake_the_waiter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.3: steering is appended without waking anyone."""
    mailbox = Mailbox()
    woke = trio.Event()

    async def waiter() -> None:
        await mailbox.wait_for_queued(trio.Event())
        woke.set()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            mailbox.steer(item("later"))
            await trio.testing.wait_all_tasks_blocked()
            assert not woke.is_set()
            assert mailbox.statistics().driver_waiting
            nursery.cancel_scope.cancel()
    assert mailbox.has_steering


async def test_mailbox_stop_event_ends_the_wait(autojump_clock: trio.testing.MockClock) -> None:
    """R3.7: disposal (its stop event set, then ``wake``) ends a parked wait with nothing queued."""
    mailbox = Mailbox()
    stop = trio.Event()
    woke = trio.Event()

    async def waiter() -> None:
        await mailbox.wait_for_queued(stop)
        woke.set()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            stop.set()
            mailbox.wake()
            await woke.wait()
    assert not mailbox.has_queued


async def test_mailbox_wake_releases_the_waiter_without_queuing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.7: ``wake`` (used by dispose) ends the wait with nothing queued."""
    mailbox = Mailbox()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(mailbox.wait_for_queued, trio.Event())
            await trio.testing.wait_all_tasks_blocked()
            mailbox.wake()
    assert not mailbox.has_queued
    assert not mailbox.statistics().driver_waiting


async def test_mailbox_wait_wakes_on_an_enqueue_even_if_a_clear_emptied_the_fifo(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.7: an enqueue followed at once by ``clear`` still wakes the waiter; the caller re-checks."""
    mailbox = Mailbox()
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(mailbox.wait_for_queued, trio.Event())
            await trio.testing.wait_all_tasks_blocked()
            mailbox.enqueue(item("gone"))
            mailbox.clear()
    assert not mailbox.has_queued
    assert not mailbox.statistics().driver_waiting


async def test_mailbox_wait_parks_with_no_scheduling_point_before_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.7: the waiter is registered before its first yield, so a check made just before still holds.

    The competing task can only run once the waiter yields; at that moment the
    waiter must already be parked on the mailbox, so an enqueue then wakes it.
    """
    for _ in range(20):
        mailbox = Mailbox()
        seen_waiting: list[bool] = []

        async def competitor(mailbox: Mailbox = mailbox, seen: list[bool] = seen_waiting) -> None:
            seen.append(mailbox.statistics().driver_waiting)
            mailbox.enqueue(item("now"))

        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(competitor)
                assert not mailbox.has_queued
                await mailbox.wait_for_queued(trio.Event())
        assert seen_waiting == [True]
        assert mailbox.has_queued


async def test_mailbox_tracks_only_the_most_recent_waiter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.7: a newer waiter replaces the older hook; an older wait ending does not clear the newer hook."""
    mailbox = Mailbox()
    first_woke = trio.Event()
    second_woke = trio.Event()

    async def wait(done: trio.Event) -> None:
        await mailbox.wait_for_queued(trio.Event())
        done.set()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            first_scope = trio.CancelScope()
            nursery.start_soon(_run_in, first_scope, wait, first_woke)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(wait, second_woke)
            await trio.testing.wait_all_tasks_blocked()
            first_scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert not first_woke.is_set()
            assert mailbox.statistics().driver_waiting, (
                "the older wait ending cleared the newer hook"
            )
            mailbox.enqueue(item("x"))
            await second_woke.wait()
    assert not first_woke.is_set()
    assert not mailbox.statistics().driver_waiting


async def _run_in(scope: trio.CancelScope, fn: object, *args: object) -> None:
    with scope:
        await fn(*args)  # type: ignore[operator]


async def test_mailbox_wait_for_change_parks_with_items_queued_until_a_drain_takes_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.6, R2.25: a wait for a change parks even with prompts queued, and the drain of a
    cancel taking them wakes it; a drain of an empty FIFO changes nothing and wakes nobody."""
    mailbox = Mailbox()
    woke = trio.Event()

    async def waiter() -> None:
        await mailbox.wait_for_change(trio.Event())
        woke.set()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            mailbox.enqueue(item("go"))
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert mailbox.statistics().driver_waiting
            mailbox.drain_steering()
            await trio.testing.wait_all_tasks_blocked()
            assert not woke.is_set()
            assert texts(mailbox.drain_queued()) == ["go"]
            await woke.wait()
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            woke = trio.Event()
            assert mailbox.drain_queued() == []
            await trio.testing.wait_all_tasks_blocked()
            assert not woke.is_set()
            mailbox.enqueue(item("again"))
            await woke.wait()
    assert not mailbox.statistics().driver_waiting


async def test_mailbox_wait_for_change_returns_at_once_when_stopped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.7: like the driver's wait, a stopped one (a disposal) does not park."""
    stop = trio.Event()
    stop.set()
    with trio.fail_after(DEADLINE):
        await Mailbox().wait_for_change(stop)
