"""The store contract on every backend for a session a failed or cancelled detach let go: its
buffered events are taken over by the next load, or written at the close."""

from __future__ import annotations

import errno
import threading
from collections.abc import Sequence

import pytest
import trio
import trio.testing

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores._backend import AppendBatch
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import lines, open_tool_turn, run_turn
from tests.stores.conftest import StoreKit


def _fail_writes(store: BufferedStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every write of *store* fail (a full disk) until ``monkeypatch.undo()``."""

    def write(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store._backend, "write", write)


async def _released(
    store: BufferedStore,
    monkeypatch: pytest.MonkeyPatch,
    session_id: str,
    *,
    stored: bool,
    open_turn: bool = False,
) -> Session:
    """A session whose detach failed: a turn *stored* (else none), then one buffered, or
    with *open_turn* a turn that stopped after a tool call."""
    session = Session.create(session_id)
    store.attach_new(session)
    if stored:
        run_turn(session, "stored")
        await store.flush(session)
    if open_turn:
        open_tool_turn(session)
    else:
        run_turn(session, "buffered")
    _fail_writes(store, monkeypatch)
    with pytest.raises(StoreError, match="No space left"):
        await store.detach(session)
    monkeypatch.undo()
    return session


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "never-stored"])
async def test_store_failed_detach_releases_the_session_to_the_next_load(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch, stored: bool
) -> None:
    """A detach whose final flush fails still lets the session go, its unflushed events
    buffered: a load of the id takes it over with them (stored or not), and its attach
    writes them with the next flush. No event the session holds is lost."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "let-go", stored=stored)
        assert store.statistics().tracked_sessions == 0
        assert store.statistics().buffered_events > 0
        taken = await store.load("let-go")
        assert lines(taken.events[:]) == lines(session.events[:])
        store.attach(taken)
        run_turn(taken, "more")
        await store.detach(taken)
        assert store.statistics().buffered_events == 0
    async with kit.open() as store:
        loaded = await store.load("let-go")
    assert lines(loaded.events[:]) == lines(taken.events[:])


async def test_store_released_events_wait_for_a_load_that_attaches_or_the_close(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A takeover let go unattached leaves the released events buffered for the next load;
    meanwhile a new session under the id is refused, and closing the store writes them."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "kept", stored=True)
        await store.detach(await store.load("kept"))
        assert store.statistics().buffered_events > 0
        with pytest.raises(StoreError, match="load it to take it over") as caught:
            store.attach_new(Session.create("kept"))
        assert caught.value.code == "SESSION_TRACKED"
        taken = await store.load("kept")
        assert lines(taken.events[:]) == lines(session.events[:])
    async with kit.open() as store:
        loaded = await store.load("kept")
    assert lines(loaded.events[:]) == lines(session.events[:])


async def test_store_takeover_attached_after_its_buffer_was_written_stores_it_once(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A released session detached again, successfully, after a load took it over: its
    buffer is written then, and the copy's attach buffers only what is not stored yet."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "twice", stored=True)
        taken = await store.load("twice")
        await store.detach(session)
        assert store.statistics().buffered_events == 0
        store.attach(taken)
        run_turn(taken, "more")
        await store.detach(taken)
    async with kit.open() as store:
        loaded = await store.load("twice")
    assert lines(loaded.events[:]) == lines(taken.events[:])


async def test_store_released_session_ending_inside_a_turn_is_taken_over_closed(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.9: a released session that ends inside a turn is taken over with that turn
    closed, as a load closes a crashed one; the closers are written with its buffer."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "open", stored=True, open_turn=True)
        taken = await store.load("open")
        assert not taken.is_turn_open
        assert lines(taken.events[: len(session.events)]) == lines(session.events[:])
        assert taken.events[-1].type == "turn/end"
        store.attach(taken)
        await store.detach(taken)
    async with kit.open() as store:
        loaded = await store.load("open")
    assert lines(loaded.events[:]) == lines(taken.events[:])


async def _cancel_once_blocked(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()


async def test_store_cancelled_detach_releases_the_session_to_the_next_load(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A detach cancelled before its final flush is written lets the session go like one
    that failed: its events stay buffered and the next load takes them over."""
    store = blocking_kit.open()
    assert store._backend.blocking
    write = store._backend.write
    writing, go_on = threading.Event(), threading.Event()

    def held_write(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        if batches[0].session_id == "other":
            writing.set()
            go_on.wait(60)
        return write(batches)

    monkeypatch.setattr(store._backend, "write", held_write)
    session, other = Session.create("cancelled"), Session.create("other")
    store.attach_new(session)
    store.attach_new(other)
    run_turn(session)
    run_turn(other)
    # No writer: each flush commits directly, one at a time, so the detach waits for other's.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.flush, other)
        await trio.to_thread.run_sync(writing.wait)
        with trio.CancelScope() as scope:
            nursery.start_soon(_cancel_once_blocked, scope)
            await store.detach(session)
        go_on.set()
    assert scope.cancelled_caught
    assert store.statistics().tracked_sessions == 1
    assert store.statistics().buffered_events == len(session.events)
    taken = await store.load("cancelled")
    store.attach(taken)
    await store.detach(taken)
    await store.aclose()
    async with blocking_kit.open() as store:
        loaded = await store.load("cancelled")
    assert lines(loaded.events[:]) == lines(session.events[:])
