"""Released sessions on every store: their old owner's flushes, and creates refused as duplicates."""

from __future__ import annotations

import errno
from collections.abc import Sequence

import pytest
import trio
import trio.testing

from retinue._errors import StoreError
from retinue._stream import TextDelta
from retinue.session import (
    AssistantChunk,
    Session,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
)
from retinue.stores._backend import AppendBatch
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import full_disk, lines, released_create, run_turn
from tests.stores.conftest import StoreKit


async def _detach_on_a_full_disk(
    store: BufferedStore, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Detach *session* while every write fails for a full disk: the detach fails, and
    releases the session with what it buffered."""
    monkeypatch.setattr(store._backend, "write", full_disk)
    with pytest.raises(StoreError, match="No space left"):
        await store.detach(session)
    monkeypatch.undo()


async def _released(
    store: BufferedStore, monkeypatch: pytest.MonkeyPatch, session_id: str
) -> Session:
    """A session with one turn stored and one buffered, whose detach failed (a full disk)."""
    session = Session.create(session_id)
    store.attach_new(session)
    run_turn(session, "stored")
    await store.flush(session)
    run_turn(session, "buffered")
    await _detach_on_a_full_disk(store, session, monkeypatch)
    return session


async def _stored_by(other: BufferedStore, session_id: str) -> Session:
    """A session of *session_id* with one turn that another store has written."""
    winner = Session.create(session_id)
    other.attach_new(winner)
    run_turn(winner, "stored first")
    await other.detach(winner)
    return winner


async def _refused(store: BufferedStore, session: Session, code: str) -> list[str]:
    """Assert that a flush and a detach of *session* fail with *code*; their messages."""
    messages = []
    for let_go in (store.flush, store.detach):
        with pytest.raises(StoreError) as caught:
            await let_go(session)
        assert caught.value.code == code
        messages.append(caught.value.message)
    return messages


async def _stored(kit: StoreKit, session_id: str) -> list[str]:
    """The lines a freshly opened store holds for *session_id*: what was really written."""
    async with kit.open() as store:
        return lines((await store.inspect(session_id)).events[:])


async def test_store_refuses_the_flush_of_events_appended_after_a_release(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.4, R11.6: a released session is observed no more, so what it appends after the
    failed detach reaches no buffer; its flush and detach fail ``SESSION_RELEASED`` naming
    the session and those events rather than return as if they were durable. What it had
    buffered is still taken over by the next load, and stored once attached."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "appended")
        buffered = lines(session.events[:])
        run_turn(session, "after the release")
        unstored = len(session.events) - len(buffered)
        for message in await _refused(store, session, "SESSION_RELEASED"):
            assert "'appended'" in message
            assert f"{unstored} event(s) appended since" in message
        taken = await store.load("appended")
        assert lines(taken.events[:]) == buffered
        store.attach(taken)
        await _refused(store, session, "SESSION_RELEASED")
        await store.detach(taken)
    assert await _stored(kit, "appended") == buffered


async def test_store_refuses_the_flush_of_a_session_taken_over_until_its_events_are_stored(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.4: once a later load took a released session over and attached its copy, the
    old session's buffered events are that copy's to write: a flush or detach of the old
    one fails ``SESSION_TAKEN_OVER`` while they are not stored, instead of returning as if
    they were durable. Once the copy's flush stored them, both succeed and write nothing."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "taken")
        taken = await store.load("taken")
        store.attach(taken)
        for message in await _refused(store, session, "SESSION_TAKEN_OVER"):
            assert "'taken'" in message
            assert "taken over by a later load" in message
        run_turn(taken, "the copy's own")
        await store.flush(taken)
        await store.flush(session)
        await store.detach(session)
        assert store.statistics().tracked_sessions == 1
        run_turn(taken, "after the old owner let go")
        await store.detach(taken)
    assert await _stored(kit, "taken") == lines(taken.events[:])


async def test_store_flush_of_a_released_session_before_its_takeover_is_attached_writes_it(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: until the copy a load took is attached, the released buffer is still the old
    session's to write: its flush stores it, and the copy's attach buffers nothing twice."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "early")
        taken = await store.load("early")
        await store.flush(session)
        assert store.statistics().buffered_events == 0
        store.attach(taken)
        await store.flush(session)
        await store.detach(taken)
    assert await _stored(kit, "early") == lines(session.events[:])


async def test_store_flush_of_a_released_session_ignores_a_later_session_under_its_id(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.4: once the copy that took a released session over has stored its events and
    been let go, what is attached under the id next (here a new session, which its flush
    refuses as stored) holds none of the old session's events: the old one's flush and
    detach succeed, as everything it holds is stored."""
    store = kit.open()
    session = await _released(store, monkeypatch, "reused")
    taken = await store.load("reused")
    store.attach(taken)
    await store.detach(taken)
    stranger = Session.create("reused")
    store.attach_new(stranger)
    run_turn(stranger)
    await store.flush(session)
    await store.detach(session)
    with pytest.raises(StoreError) as caught:
        await store.flush(stranger)
    assert caught.value.code == "SESSION_ALREADY_EXISTS"
    with pytest.raises(StoreError) as caught:
        await store.aclose()
    assert caught.value.code == "CLOSE_FAILED"
    assert await _stored(kit, "reused") == lines(session.events[:])


async def test_store_create_refused_as_a_duplicate_is_not_kept_for_a_load_to_take_over(
    kit: StoreKit,
) -> None:
    """R11.3, R11.8: a new session whose create is refused because its id is stored
    (``SESSION_ALREADY_EXISTS``) can never be written under that id: the detach that fails on it
    keeps none of its events for the next load, which loads the stored session, and a later flush or
    detach of it is refused the same way again. Kept, the events would be returned by the load as
    the session, and closing the store would fail."""
    store = kit.open()
    async with store:
        stored = Session.create("duplicate")
        store.attach_new(stored)
        run_turn(stored, "the stored one")
        await store.detach(stored)
        refused = Session.create("duplicate")
        store.attach_new(refused)
        run_turn(refused, "refused")
        with pytest.raises(StoreError) as caught:
            await store.detach(refused)
        assert caught.value.code == "SESSION_ALREADY_EXISTS"
        assert store.statistics().buffered_events == 0
        await _refused(store, refused, "SESSION_ALREADY_EXISTS")
        loaded = await store.load("duplicate")
        assert lines(loaded.events[:]) == lines(stored.events[:])
        store.attach(loaded)
        run_turn(loaded, "more")
        await store.detach(loaded)
    assert await _stored(kit, "duplicate") == lines(loaded.events[:])


async def test_store_load_of_a_released_create_whose_id_another_writer_stored_loads_that(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """R11.3, R11.8: a new session released by a failed detach before its create was
    written can never be written once another writer stores its id: the next load loads
    the stored session, not the released events, and drops them with a warning naming
    the session; a flush or detach of the released session then fails
    ``SESSION_ALREADY_EXISTS``."""
    async with kit.open() as store, kit.open() as other:
        released = await released_create(store, monkeypatch, "raced")
        assert store.statistics().buffered_events == len(released.events)
        winner = await _stored_by(other, "raced")
        loaded = await store.load("raced")
        assert lines(loaded.events[:]) == lines(winner.events[:])
        assert store.statistics().buffered_events == 0
        [warning] = [r.getMessage() for r in caplog.records if "dropping" in r.getMessage()]
        assert warning.startswith(f"session 'raced': dropping the {len(released.events)} ")
        await _refused(store, released, "SESSION_ALREADY_EXISTS")
        store.attach(loaded)
        run_turn(loaded, "more")
        await store.detach(loaded)
    assert await _stored(kit, "raced") == lines(loaded.events[:])


async def test_store_released_create_refused_on_a_later_detach_is_dropped(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3: a released new session detached again once another writer stored its id is
    refused ``SESSION_ALREADY_EXISTS``, and keeps nothing buffered for a load or a close."""
    async with kit.open() as store, kit.open() as other:
        released = await released_create(store, monkeypatch, "retried")
        winner = await _stored_by(other, "retried")
        await _refused(store, released, "SESSION_ALREADY_EXISTS")
        assert store.statistics().buffered_events == 0
        loaded = await store.load("retried")
        assert lines(loaded.events[:]) == lines(winner.events[:])
        await store.detach(loaded)


async def test_store_released_session_detached_again_is_let_go_as_any_other(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.4: once a second detach of a released session stored its buffer and returned,
    the session is detached like one whose first detach succeeded: what it appends later
    reaches no buffer, and its flush and detach return as they do for any detached
    session, rather than fail ``SESSION_RELEASED`` blaming a detach that failed."""
    async with kit.open() as store:
        plain = Session.create("plain")
        store.attach_new(plain)
        run_turn(plain)
        await store.detach(plain)
        session = await _released(store, monkeypatch, "again")
        await store.detach(session)
        detached_with = lines(session.events[:])
        assert store.statistics().buffered_events == 0
        for detached in (plain, session):
            run_turn(detached, "after the detach")
            await store.flush(detached)
            await store.detach(detached)
    assert await _stored(kit, "again") == detached_with


async def test_store_released_create_taken_over_and_released_again_refuses_both_sessions(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3, R11.4: a new session released before its create was written, taken over by a load
    whose copy's detach fails too, holds events only that copy's buffer could write. Once another
    writer stores the id and a load drops that buffer, a flush or detach of either session fails
    ``SESSION_ALREADY_EXISTS``, not only the copy's: the first one's does not return as if its
    events were stored, none of them being."""
    async with kit.open() as store, kit.open() as other:
        first = Session.create("chained")
        store.attach_new(first)
        run_turn(first, "never stored")
        monkeypatch.setattr(store._backend, "write", full_disk)
        with pytest.raises(StoreError, match="No space left"):
            await store.detach(first)
        copy = await store.load("chained")
        store.attach(copy)
        with pytest.raises(StoreError, match="No space left"):
            await store.detach(copy)
        monkeypatch.undo()
        winner = await _stored_by(other, "chained")
        loaded = await store.load("chained")
        assert lines(loaded.events[:]) == lines(winner.events[:])
        await _refused(store, copy, "SESSION_ALREADY_EXISTS")
        await _refused(store, first, "SESSION_ALREADY_EXISTS")
        await store.detach(loaded)
    assert await _stored(kit, "chained") == lines(winner.events[:])


async def test_store_flush_waiting_while_a_load_drops_a_released_create_fails_so(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3, R11.4: a flush of a new session released before its create was written, waiting for
    the writer while a load finds the id stored by another writer since and drops the buffer, fails
    ``SESSION_ALREADY_EXISTS`` as a later flush does, rather than finding nothing left to write and
    returning as if the events were stored."""
    async with kit.open() as store, kit.open() as other:
        released = await released_create(store, monkeypatch, "overtaken")
        winner = await _stored_by(other, "overtaken")
        loaded: list[Session] = []
        refused: list[str | None] = []

        async def load() -> None:
            loaded.append(await store.load("overtaken"))

        async def flush() -> None:
            with pytest.raises(StoreError) as caught:
                await store.flush(released)
            refused.append(caught.value.code)

        # Holding the commit lock, the load looks the id up first, then the flush commits.
        async with trio.open_nursery() as nursery, store._committer.commit_lock:
            nursery.start_soon(load)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(flush)
            await trio.testing.wait_all_tasks_blocked()
        assert refused == ["SESSION_ALREADY_EXISTS"]
        [session] = loaded
        assert lines(session.events[:]) == lines(winner.events[:])
        await _refused(store, released, "SESSION_ALREADY_EXISTS")
        await store.detach(session)
    assert await _stored(kit, "overtaken") == lines(winner.events[:])


async def test_store_load_of_a_released_create_committed_with_its_reply_lost_takes_it_over(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """R11.3, R11.8: a new session whose create was committed but whose flush failed (its reply
    lost), then released by a failed detach, is stored by no other writer: the next load takes it
    over with every buffered event, and the copy's flush writes those its create did not store.
    Taking the stored create for another writer's, the load would drop the buffer, losing what was
    appended after it."""
    async with kit.open() as store:
        session = Session.create("unanswered")
        store.attach_new(session)
        run_turn(session, "committed")
        await _release_with_the_create_answer_lost(store, session, monkeypatch)
        taken = await store.load("unanswered")
        assert lines(taken.events[:]) == lines(session.events[:])
        assert not [r for r in caplog.records if "dropping" in r.getMessage()]
        store.attach(taken)
        await store.detach(taken)
        await store.flush(session)
    assert await _stored(kit, "unanswered") == lines(session.events[:])


async def test_store_load_takes_over_a_committed_create_whose_chunk_holds_a_split_pair(
    record_kit: StoreKit, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """R11.3, R11.8: a create committed with its reply lost is the session's own even when a chunk's
    text holds a surrogate pair as two code points, which reads back as one character: the load
    takes it over with its buffered turn, not taking the stored create for another writer's because
    its lines differ from the live ones, which would drop that turn. (The backends that store
    encoded records: the memory store keeps the events themselves.)"""
    async with record_kit.open() as store:
        session = Session.create("split-pair")
        store.attach_new(session)
        session.append(TurnStart(1, TurnTrigger("message")))
        session.append(StepStart(1, 1))
        session.append(AssistantChunk(1, 1, TextDelta(0, "smile \ud83d\ude00")))
        session.append(StepEnd(1, 1))
        session.append(TurnEnd(1, TurnEndReason.completed()))
        await _release_with_the_create_answer_lost(store, session, monkeypatch)
        taken = await store.load("split-pair")
        assert len(taken.events) == len(session.events)
        assert not [r for r in caplog.records if "dropping" in r.getMessage()]
        store.attach(taken)
        await store.detach(taken)
    async with record_kit.open() as store:
        stored = await store.inspect("split-pair")
    assert len(stored.events) == len(session.events)
    assert lines(stored.events[5:]) == lines(session.events[5:])


async def _release_with_the_create_answer_lost(
    store: BufferedStore, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flush *session*'s create, stored but its answer lost; log a turn; then fail the
    detach, which releases the session with that turn buffered."""
    write = store._backend.write

    def reply_lost(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        write(batches)
        raise OSError(errno.ECONNRESET, "Connection reset by peer")

    monkeypatch.setattr(store._backend, "write", reply_lost)
    with pytest.raises(StoreError, match="Connection reset"):
        await store.flush(session)
    run_turn(session, "buffered")
    await _detach_on_a_full_disk(store, session, monkeypatch)
