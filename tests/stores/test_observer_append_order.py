"""An observer that appends while an event is announced cannot make the store persist a seq gap.

A session announces appends in seq order: an observer registered before the
store's may append seq N+1 while seq N is announced, and the store hears N
before N+1. Its buffer is written in seq order (R4.5, R11.3), and a commit
the observer asks for at once stores what the log holds, heard or not.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from retinue.session import Event, Session, TurnEnd, TurnEndReason, TurnStart, TurnTrigger
from retinue.stores import JSONLStore, MemoryStore, SQLiteStore
from retinue.stores._writebehind import BufferedStore

Opener = Callable[[Path], BufferedStore]
OPENERS: list[Opener] = [
    JSONLStore,
    lambda root: SQLiteStore(root / "store.db"),
]


def _nesting_observer(session: Session, at: set[int]) -> Callable[[Event], None]:
    """Append one custom event while each seq in *at* is notified."""

    def observe(event: Event) -> None:
        if event.seq in at:
            at.discard(event.seq)
            session.append_custom("x/nested", {"during": event.seq})

    return observe


@pytest.mark.parametrize("open_store", OPENERS, ids=["jsonl", "sqlite"])
async def test_an_append_during_notification_is_stored_in_seq_order(
    tmp_path: Path, open_store: Opener
) -> None:
    """R4.5, R11.3: events heard out of order are stored in seq order and load back."""
    async with open_store(tmp_path) as store:
        session = Session.create("o", created_at=1)
        session.observe(_nesting_observer(session, {0, 2}))
        store.attach_new(session)
        session.append(TurnStart(1, TurnTrigger("message")))
        session.append(TurnEnd(1, TurnEndReason.completed()))
        expected = [(e.seq, e.type) for e in session.events]
        await store.flush(session)
        await store.detach(session)
    assert expected == [(0, "turn/start"), (1, "x/nested"), (2, "turn/end"), (3, "x/nested")]
    async with open_store(tmp_path) as store:
        loaded = await store.load("o")
    assert [(e.seq, e.type) for e in loaded.events] == expected


@pytest.mark.parametrize("open_store", OPENERS, ids=["jsonl", "sqlite"])
async def test_out_of_order_appends_after_a_flush_follow_the_stored_events(
    tmp_path: Path, open_store: Opener
) -> None:
    """R11.3: after a flush empties the buffer, a nested append still lands after its cause."""
    async with open_store(tmp_path) as store:
        session = Session.create("o", created_at=1)
        session.observe(_nesting_observer(session, {1}))
        store.attach_new(session)
        session.append(TurnStart(1, TurnTrigger("message")))
        await store.flush(session)
        session.append(TurnEnd(1, TurnEndReason.completed()))
        await store.flush(session)
        await store.detach(session)
    async with open_store(tmp_path) as store:
        loaded = await store.load("o")
    assert [(e.seq, e.type) for e in loaded.events] == [
        (0, "turn/start"),
        (1, "turn/end"),
        (2, "x/nested"),
    ]


async def test_a_commit_at_once_during_notification_stores_every_event_logged_so_far() -> None:
    """R11.3, R11.4: an observer ahead of the store's appends while seq 1 is announced and
    commits the store at once: the store has heard neither seq 1 nor seq 2 yet, so it takes
    both from the log and stores all three, and the log loads whole; it hears them after."""
    stored_then: list[int] = []
    async with MemoryStore() as store:
        session = Session.create("o", created_at=1)
        nest = _nesting_observer(session, {1})

        def nest_and_commit(event: Event) -> None:
            nest(event)
            if event.seq == 1:
                assert store.flush_nowait(session)
                stored_then.append(store.statistics().committed_events)

        session.observe(nest_and_commit)
        store.attach_new(session)
        session.append(TurnStart(1, TurnTrigger("message")))
        session.append(TurnEnd(1, TurnEndReason.completed()))
        # Seq 1, heard once stored, is no buffered event, and no flush request follows it.
        heard_after = store.statistics()
        session.append_custom("x/after", {})
        expected = [(e.seq, e.type) for e in session.events]
        await store.flush(session)
        await store.detach(session)
        loaded = await store.load("o")
    assert expected == [(0, "turn/start"), (1, "turn/end"), (2, "x/nested"), (3, "x/after")]
    assert stored_then == [3]
    assert (heard_after.buffered_events, heard_after.committed_events) == (0, 3)
    assert [(e.seq, e.type) for e in loaded.events] == expected


async def test_a_commit_at_once_before_the_store_heard_anything_stores_the_log() -> None:
    """R11.4: a flush asked for while the first event is announced, the store's buffer still
    empty, stores the events logged before it was asked for rather than nothing."""
    async with MemoryStore() as store:
        session = Session.create("o", created_at=1)
        nest = _nesting_observer(session, {0})
        stored_then: list[int] = []

        def nest_and_commit(event: Event) -> None:
            nest(event)
            if event.seq == 0:
                store.flush_nowait(session)
                stored_then.append(store.statistics().committed_events)

        session.observe(nest_and_commit)
        store.attach_new(session)
        session.append(TurnStart(1, TurnTrigger("message")))
        assert stored_then == [2]
        assert store.statistics().buffered_events == 0
        session.append(TurnEnd(1, TurnEndReason.completed()))
        await store.flush(session)
        await store.detach(session)
        loaded = await store.load("o")
    assert [(e.seq, e.type) for e in loaded.events] == [
        (0, "turn/start"),
        (1, "x/nested"),
        (2, "turn/end"),
    ]


async def test_a_detach_after_a_commit_at_once_during_notification_returns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R11.6: the events a commit at once took from the log before the store heard them are stored,
    so once heard they are let go: the detach that follows returns rather than waiting for ever on a
    buffer no commit would empty."""
    async with MemoryStore() as store:
        session = Session.create("o", created_at=1)

        def commit_at_turn_end(event: Event) -> None:
            if event.seq == 1:
                assert store.flush_nowait(session)

        session.observe(commit_at_turn_end)
        store.attach_new(session)
        session.append(TurnStart(1, TurnTrigger("message")))
        session.append(TurnEnd(1, TurnEndReason.completed()))
        store.flush_nowait(session)
        # Stored before they were heard: let go, or the detach below would spin for ever.
        assert not store._tracked[session.id].buffer
        with trio.fail_after(5):
            await store.detach(session)
        loaded = await store.load("o")
    assert [e.type for e in loaded.events] == ["turn/start", "turn/end"]
