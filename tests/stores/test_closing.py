"""What a store does with sessions attached while it closes (R11.6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import SQLiteStore
from retinue.stores._sqlite import SQLiteBackend
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import (
    REAL_DEADLINE,
    HeldCall,
    close_into,
    enter_noting_refusal,
    lines,
    load_quietly,
    run_turn,
)
from tests.stores.conftest import StoreKit


async def _attach_refusals(store: BufferedStore, session: Session, refusals: list[str]) -> None:
    """Attach *session* as new, recording the code it is refused with."""
    await trio.lowlevel.checkpoint()
    try:
        store.attach_new(session)
    except StoreError as exc:
        refusals.append(str(exc.code))


async def test_store_refuses_an_attach_while_its_close_drains(kit: StoreKit) -> None:
    """R11.6: closing drains the sessions attached when it begins; one attached meanwhile
    would be neither drained nor let go, buffering each later append for a store that can
    no longer write it, so the attach is refused ``STORE_CLOSED`` and nothing is kept."""
    draining = Session.create("draining")
    run_turn(draining)
    late = Session.create("late")
    refusals: list[str] = []
    store = kit.open()
    store.attach_new(draining)
    async with trio.open_nursery() as nursery:
        # Runs at the close's first schedule point, with the drain under way.
        nursery.start_soon(_attach_refusals, store, late, refusals)
        await store.aclose()
    run_turn(late)
    assert refusals == ["STORE_CLOSED"]
    assert store.statistics().buffered_events == 0
    async with kit.open() as reopened:
        assert lines((await reopened.inspect("draining")).events[:]) == lines(draining.events[:])
        assert not await reopened.exists("late")


async def test_a_close_while_another_drains_waits_for_it_and_raises_nothing(kit: StoreKit) -> None:
    """R11.6: a close is idempotent, also while another task's close drains: it waits for
    that drain and returns, rather than report the sessions that drain stores as not
    drained (its own requests, queued behind, found the store closed)."""
    sessions = [Session.create(f"closing-{index}") for index in range(3)]
    store = kit.open()
    for session in sessions:
        run_turn(session)
        store.attach_new(session)
    finished: list[str] = []

    async def close(name: str) -> None:
        await store.aclose()
        finished.append(name)

    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(close, "first")
            nursery.start_soon(close, "second")
    assert sorted(finished) == ["first", "second"]
    async with kit.open() as reopened:
        for session in sessions:
            assert lines((await reopened.inspect(session.id)).events) == lines(session.events)


async def test_a_close_while_another_releases_the_storage_waits_for_the_release(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close called while another releases the storage, the store already marked
    closed, returns once the storage is released, so a new store of the same storage can
    load the session the closed one held, rather than find it still claimed."""
    session = Session.create("released")
    run_turn(session)
    store = blocking_kit.open()
    store.attach_new(session)
    await store.flush(session)
    held_close = HeldCall(store._backend.close)
    finished: list[str] = []

    def close_storage() -> None:
        held_close()
        finished.append("storage released")

    async def close_again() -> None:
        await store.aclose()
        finished.append("second close")

    monkeypatch.setattr(store._backend, "close", close_storage)
    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.aclose)
            await trio.to_thread.run_sync(held_close.reached.wait, REAL_DEADLINE)
            nursery.start_soon(close_again)
            await trio.testing.wait_all_tasks_blocked()  # the second close ends, or waits
            held_close.proceed.set()
        assert finished == ["storage released", "second close"]
        async with blocking_kit.open() as reopened:
            assert lines((await reopened.load(session.id)).events) == lines(session.events)


def _no_space_left(*args: object) -> object:
    raise OSError(28, "No space left on device")


async def test_a_close_waiting_for_one_that_fails_raises_close_failed_from_its_error(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close called while another drains, whose write then fails (the disk is
    full), raises ``CLOSE_FAILED`` from that close's error, as that close does, rather than
    return as if the session it could not write were stored."""
    session = Session.create("unwritten")
    run_turn(session)
    store = blocking_kit.open()
    store.attach_new(session)
    writing = HeldCall(_no_space_left)
    monkeypatch.setattr(store._backend, "write", writing)
    errors: dict[str, StoreError] = {}

    async def close(name: str) -> None:
        try:
            await store.aclose()
        except StoreError as exc:
            errors[name] = exc

    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(close, "first")
            await trio.to_thread.run_sync(writing.reached.wait, REAL_DEADLINE)
            nursery.start_soon(close, "second")
            await trio.testing.wait_all_tasks_blocked()  # the second close waits for the first
            writing.proceed.set()
    assert sorted(errors) == ["first", "second"]
    assert {error.code for error in errors.values()} == {"CLOSE_FAILED"}
    assert errors["second"].__cause__ is errors["first"]


async def _enter_as_it_is_closed(
    store: BufferedStore,
    monkeypatch: pytest.MonkeyPatch,
    *steps: Callable[[], Awaitable[object]],
) -> list[str]:
    """Enter *store* in one task and, while the entry opens the storage in its worker
    thread, start each of *steps* (``store.aclose`` unless given) in a task of its own
    once those before it end or wait; the codes the entry was refused with."""
    opening = HeldCall(store._backend.open)
    monkeypatch.setattr(store._backend, "open", opening)
    refusals: list[str] = []

    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(enter_noting_refusal, store, refusals)
            await trio.to_thread.run_sync(opening.reached.wait, REAL_DEADLINE)
            for step in steps or (store.aclose,):
                nursery.start_soon(step)
                await trio.testing.wait_all_tasks_blocked()  # a close waits for the open
            opening.proceed.set()
    return refusals


async def test_an_entry_the_store_is_closed_under_is_refused(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store closed while another task's entry opens its storage refuses that entry
    (``STORE_CLOSED``), as it refuses any entry once closed, rather than let it in to a
    store that refuses every attach and never closes the storage opened for it."""
    refusals = await _enter_as_it_is_closed(blocking_kit.open(), monkeypatch)
    assert refusals == ["STORE_CLOSED"]


async def test_a_close_waiting_for_one_cancelled_before_its_drain_raises_close_failed(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close called while another waits to drain (the storage still opening),
    that one then cancelled, raises ``CLOSE_FAILED`` naming what was left unwritten, rather
    than return as if the attached session were stored."""
    session = Session.create("never-drained")
    run_turn(session)
    store = blocking_kit.open()
    store.attach_new(session)
    first = trio.CancelScope()
    outcomes: list[str] = []

    async def close_first() -> None:
        with first:
            await store.aclose()
        outcomes.append("cancelled" if first.cancelled_caught else "closed")

    async def close_second() -> None:
        try:
            await store.aclose()
            outcomes.append("closed")
        except StoreError as exc:
            outcomes.append(f"{exc.code}: {exc}")

    async def cancel_first() -> None:
        first.cancel()
        await trio.lowlevel.checkpoint()

    steps = (close_first, close_second, cancel_first)
    assert await _enter_as_it_is_closed(store, monkeypatch, *steps) == ["STORE_CLOSED"]
    assert outcomes[0] == "cancelled"
    assert outcomes[1].startswith("CLOSE_FAILED")
    assert "1 session(s) not written" in outcomes[1]
    async with blocking_kit.open() as reopened:
        assert not await reopened.exists(session.id)


def _open_files_of(path: Path) -> list[str]:
    """The descriptors of this process open on *path* or its WAL files."""
    fds = Path("/proc/self/fd")
    targets = [str(fd.readlink()) for fd in fds.iterdir() if fd.is_symlink()]
    return [target for target in targets if target.startswith(str(path))]


async def test_storage_opened_for_an_entry_the_store_is_closed_under_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SQLite database an entry opened as the store closed is closed again, though the close
    finds nothing open to close and no later close of the closed store would close it."""
    database = tmp_path / "sessions.db"
    await _enter_as_it_is_closed(SQLiteStore(database), monkeypatch)
    assert _open_files_of(database) == []


async def _entry_refusals(store: BufferedStore) -> list[str]:
    """Enter *store*; the codes the entry was refused with (none: it got in)."""
    try:
        async with store:
            return []
    except StoreError as exc:
        return [str(exc.code)]


async def test_an_entry_of_a_closed_store_another_task_is_inside_is_refused(kit: StoreKit) -> None:
    """A store closed by ``aclose`` while a task is still inside its ``async with`` refuses
    a later entry (``STORE_CLOSED``), as a closed store nobody is inside does, rather than
    let it in to a store that refuses every attach."""
    store = kit.open()
    async with store:
        await store.aclose()
        with trio.fail_after(REAL_DEADLINE):
            assert await _entry_refusals(store) == ["STORE_CLOSED"]


async def test_an_entry_while_the_store_drains_on_close_is_refused(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry while the store's close drains is refused (``STORE_CLOSED``): the close
    ends with the store closed, and what the entry attached would be refused."""
    store = blocking_kit.open()
    session = Session.create("draining")
    run_turn(session)
    store.attach_new(session)
    writing = HeldCall(store._backend.write)
    monkeypatch.setattr(store._backend, "write", writing)
    refusals: list[str] = []

    async def enter_during_the_drain() -> None:
        await trio.to_thread.run_sync(writing.reached.wait, REAL_DEADLINE)
        try:
            async with store:
                writing.proceed.set()  # let in: its exit waits for the drain
        except StoreError as exc:
            refusals.append(str(exc.code))
        finally:
            writing.proceed.set()

    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(enter_during_the_drain)
            await store.aclose()
    assert refusals == ["STORE_CLOSED"]


async def test_an_entry_the_store_starts_closing_under_is_refused_and_the_close_drains(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close that begins while an entry opens the storage drains once the storage is open
    and closes the store: the entry is refused (``STORE_CLOSED``) rather than let in to the
    closed store, and the close stores every attached session."""
    store = blocking_kit.open()
    session = Session.create("drained-as-entered")
    run_turn(session)
    store.attach_new(session)
    refusals = await _enter_as_it_is_closed(store, monkeypatch)
    assert refusals == ["STORE_CLOSED"]
    async with blocking_kit.open() as reopened:
        assert lines((await reopened.inspect(session.id)).events) == lines(session.events)


async def test_a_close_waiting_for_a_cancelled_one_whose_commit_landed_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close cancelled while its drain's commit is in the writer's thread releases the
    storage once that commit ends; a close waiting for it returns when the commit stored everything,
    and raises no ``CLOSE_FAILED`` naming the events as not written for asking before the writer has
    recorded the commit's results."""
    path = tmp_path / "s.db"
    session = Session.create("landed")
    run_turn(session)
    store = SQLiteStore(str(path))
    backend = store._backend
    assert isinstance(backend, SQLiteBackend)
    real_begin, real_write = backend._begin, backend.write
    writing = HeldCall(lambda: None)

    def begin_then_hold(conn: object) -> None:
        real_begin(conn)  # type: ignore[arg-type]  # a sqlite3 connection
        writing()  # the transaction holds the write lock the cancelled close waits for

    def write_then_linger(batches: object) -> object:
        result = real_write(batches)  # type: ignore[arg-type]
        time.sleep(0.3)  # noqa: TID251 - in the writer's thread: the write landed, not yet recorded
        return result

    monkeypatch.setattr(backend, "_begin", begin_then_hold)
    monkeypatch.setattr(backend, "write", write_then_linger)
    first = trio.CancelScope()
    outcomes: list[str] = []

    async def close(scope: trio.CancelScope | None) -> None:
        try:
            with scope or trio.CancelScope():
                await store.aclose()
            outcomes.append("ended")
        except StoreError as exc:
            outcomes.append(str(exc.code))

    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(close, first)
                await trio.to_thread.run_sync(writing.reached.wait, REAL_DEADLINE)
                nursery.start_soon(close, None)
                await trio.testing.wait_all_tasks_blocked()
                first.cancel()
                writing.proceed.set()
    assert outcomes == ["ended", "ended"]
    async with SQLiteStore(str(path)) as again:
        assert len((await again.inspect(session.id)).events) == len(session.events)


async def test_a_cancelled_close_waits_for_no_load_that_reads_the_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close cancelled under a deadline returns once the storage is released, though a load
    still reads it in a worker thread: waiting for the commit lock a load holds, it does not wait
    for that read too (an unanswering server's, with no bound)."""
    store = SQLiteStore(str(tmp_path / "s.db"))
    backend = store._backend
    assert isinstance(backend, SQLiteBackend)
    real_write, real_contains = backend.write, backend.contains
    reading = HeldCall(real_contains)
    failures = [OSError("disk hiccup")]

    def write_failing_once(batches: object) -> object:
        if failures:
            raise failures.pop()
        return real_write(batches)  # type: ignore[arg-type]

    monkeypatch.setattr(backend, "write", write_failing_once)
    monkeypatch.setattr(backend, "contains", reading)
    session = Session.create("released")
    run_turn(session)
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            with pytest.raises(StoreError):
                await store.detach(session)  # released, its create unwritten
            async with trio.open_nursery() as nursery:
                nursery.start_soon(load_quietly, store, session.id)
                await trio.to_thread.run_sync(reading.reached.wait, REAL_DEADLINE)
                try:
                    # The deadline cuts the close; it must then return within the release.
                    with trio.fail_after(5), trio.move_on_after(0.1):
                        await store.aclose()
                finally:
                    reading.proceed.set()


async def test_a_close_waiting_for_a_cancelled_one_counts_what_a_load_found_stored(
    transactional_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a session whose failed detach in fact stored its events (the commit's reply lost), a
    load of it checking the stored id as a close is cancelled: a close waiting for that one returns
    once the check has found them stored, raising no ``CLOSE_FAILED`` that names them as not
    written, counted before the check is over."""
    store = transactional_kit.open()
    backend: Any = store._backend
    real_write, real_read = backend.write, backend.read
    read_back, proceed = threading.Event(), threading.Event()
    replies = ["lost"]

    def write_reply_lost(batches: object) -> object:
        results = real_write(batches)
        if replies:
            raise OSError(f"connection reset: the reply to the commit was {replies.pop()}")
        return results

    def read_then_hold(session_id: str) -> object:
        stored = real_read(session_id)
        read_back.set()
        proceed.wait(REAL_DEADLINE)
        return stored

    monkeypatch.setattr(backend, "write", write_reply_lost)
    monkeypatch.setattr(backend, "read", read_then_hold)
    session = Session.create("reply-lost")
    run_turn(session)
    outcomes: list[str] = []
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            with pytest.raises(StoreError):
                await store.detach(session)  # released: stored, its commit unanswered
            async with trio.open_nursery() as nursery:
                nursery.start_soon(load_quietly, store, session.id)
                await trio.to_thread.run_sync(read_back.wait, REAL_DEADLINE)
                first, first_ended = trio.CancelScope(), trio.Event()
                for scope, ended in ((first, first_ended), (trio.CancelScope(), trio.Event())):
                    nursery.start_soon(close_into, store, scope, outcomes, ended)
                    await trio.testing.wait_all_tasks_blocked()  # the first drains, then the next
                first.cancel()
                await first_ended.wait()
                proceed.set()
    assert outcomes == ["cancelled", "ended"]
    async with transactional_kit.open() as again:
        assert len((await again.inspect(session.id)).events) == len(session.events)
