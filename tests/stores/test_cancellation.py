"""A store's lifetime under cancellation: entering and leaving ``async with`` (R11.6).

These run on the real clock: the store opens and closes its storage in worker threads, and under
autojump a worker thread lets virtual time race ahead to any deadline, cancelling an enter
mid-open.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue._errors import StoreError
from retinue._sources import MessageSource
from retinue.session import Session, TurnStart, TurnTrigger
from retinue.stores import AppendBatch, JSONLStore, SQLiteStore
from retinue.stores._jsonl import JSONLBackend
from retinue.stores._sqlite import SQLiteBackend
from retinue.stores._writebehind import BufferedStore
from retinue.testing import Hang, Reply, ScriptedModel
from tests.stores._kit import FlakyBackend, run_turn

REAL_DEADLINE = 60.0


def cancel_after_open(monkeypatch: pytest.MonkeyPatch, scope: trio.CancelScope) -> None:
    """Make the SQLite backend cancel *scope* from its worker thread once it has opened."""
    real_open = SQLiteBackend.open

    def open_then_cancel(backend: SQLiteBackend) -> None:
        real_open(backend)
        trio.from_thread.run_sync(scope.cancel)

    monkeypatch.setattr(SQLiteBackend, "open", open_then_cancel)


async def test_store_enter_cancelled_while_opening_unwinds_and_can_be_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while its storage opens, ``async with`` leaves no writer nursery and no storage open."""
    store = SQLiteStore(tmp_path / "sessions.db")
    with trio.fail_after(REAL_DEADLINE):
        with trio.CancelScope() as scope:
            cancel_after_open(monkeypatch, scope)
            async with store:
                pytest.fail("the body ran although entering was cancelled")
        assert scope.cancelled_caught
        assert " unopened " in repr(store)
        monkeypatch.undo()
        session = Session.create("retried")
        async with store:
            store.attach_new(session)
            run_turn(session)
            await store.detach(session)
            assert await store.exists("retried")


async def test_runtime_cancelled_while_its_store_opens_exits_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deadline that fires while ``open_runtime`` opens an SQLite store just cancels the block."""
    store = SQLiteStore(tmp_path / "sessions.db")
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(REAL_DEADLINE):
        with trio.CancelScope() as scope:
            cancel_after_open(monkeypatch, scope)
            async with retinue.open_runtime(models=model, store=store):
                pytest.fail("the runtime was handed over although opening was cancelled")
        assert scope.cancelled_caught
        assert " unopened " in repr(store)


async def test_store_exit_under_cancellation_still_releases_the_storage(tmp_path: Path) -> None:
    """Leaving ``async with`` cancelled still closes the store and drops its session locks."""
    root = tmp_path / "sessions"
    session = Session.create("locked")
    async with JSONLStore(root) as store:
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
    store = JSONLStore(root)
    with trio.fail_after(REAL_DEADLINE):
        with trio.CancelScope() as scope:
            async with store:
                loaded = await store.load("locked")  # claims the file (flock)
                store.attach(loaded)
                run_turn(loaded, "never flushed")
                scope.cancel()
        assert scope.cancelled_caught
        assert " closed " in repr(store)
        with pytest.raises(StoreError) as caught:
            store.attach_new(Session.create("late"))
        assert caught.value.code == "STORE_CLOSED"
        async with JSONLStore(root) as other:
            assert len((await other.load("locked")).events) == len(session.events)


async def test_memory_store_flush_commits_even_inside_a_cancelled_scope() -> None:
    """A store that is not durable commits before its schedule point: a cancel loses nothing (R7.42)."""
    store = retinue.stores.MemoryStore()
    assert not store.durable
    session = Session.create("kept")
    store.attach_new(session)
    session.append(TurnStart(1, TurnTrigger("message", MessageSource())))
    with trio.CancelScope() as scope:
        scope.cancel()
        await store.flush(session)
    assert not scope.cancelled_caught
    stored = await store.inspect("kept")
    assert [event.type for event in stored.events] == ["turn/start"]


async def test_store_aclose_cancelled_while_draining_still_releases_the_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a deadline inside ``aclose``'s last write still closes the storage and drops its locks."""
    root = tmp_path / "sessions"
    store = JSONLStore(root)  # no ``async with``: aclose drains directly
    session = Session.create("drained")
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    run_turn(session, "left for the drain")
    real_write = JSONLBackend.write

    def slow_write(
        backend: JSONLBackend, batches: Sequence[AppendBatch]
    ) -> list[StoreError | None]:
        time.sleep(0.2)  # noqa: TID251 - a slow fsync, in the store's worker thread
        return real_write(backend, batches)

    monkeypatch.setattr(JSONLBackend, "write", slow_write)
    with trio.fail_after(REAL_DEADLINE):
        with trio.move_on_after(0.05) as scope:
            await store.aclose()
        assert scope.cancel_called
        assert " closed " in repr(store)
        monkeypatch.undo()
        async with JSONLStore(root) as other:
            assert len((await other.load("drained")).events) == len(session.events)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "jsonl"])
async def test_store_entered_again_by_the_runtime_stays_open_until_the_outer_exit(
    tmp_path: Path, kind: str
) -> None:
    """R12.10: ``open_runtime(store=...)`` inside ``async with store`` leaves the store to its owner.

    The runtime's exit disposes its agents but does not close the store, so a
    second runtime resumes the session; the outermost exit closes it.
    """
    stores: dict[str, Callable[[], BufferedStore]] = {
        "memory": retinue.stores.MemoryStore,
        "sqlite": lambda: SQLiteStore(tmp_path / "sessions.db"),
        "jsonl": lambda: JSONLStore(tmp_path / "sessions"),
    }
    store = stores[kind]()
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    options = retinue.AgentOptions(model="scripted")
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            async with retinue.open_runtime(models=model, store=store) as rt:
                agent = await rt.create_agent("a", options)
                await agent.ask("one")
            assert await store.exists(agent.id)
            async with retinue.open_runtime(models=model, store=store) as rt:
                resumed = await rt.resume_agent(agent.id, options)
                await resumed.ask("two")
            stored = await store.inspect(agent.id)
        assert " closed " in repr(store)
    assert [event.type for event in stored.events].count("turn/end") == 2


async def test_cancelled_close_never_writes_its_queued_drain_after_closing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6, R12.7: a close cancelled while the writer is busy refuses the drain it queued
    instead of writing it after the store closed, which claimed the session again for nobody.
    """
    path = tmp_path / "sessions.db"
    async with SQLiteStore(path) as seed:
        for session_id in ("busy", "queued"):
            session = Session.create(session_id)
            seed.attach_new(session)
            run_turn(session)
            await seed.detach(session)
    store = SQLiteStore(path)
    real_savepoint = SQLiteBackend._write_savepoint
    writing = threading.Event()

    def slow_savepoint(backend: SQLiteBackend, conn: Any, batch: AppendBatch, claimed: Any) -> Any:
        if batch.session_id == "busy":
            writing.set()
            time.sleep(0.3)  # noqa: TID251 - a worker thread, inside the write transaction
        return real_savepoint(backend, conn, batch, claimed)

    with trio.fail_after(REAL_DEADLINE):
        async with store:
            busy, queued = await store.load("busy"), await store.load("queued")
            store.attach(busy)
            store.attach(queued)
            run_turn(busy)
            run_turn(queued)
            monkeypatch.setattr(SQLiteBackend, "_write_savepoint", slow_savepoint)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(store.flush, busy)
                # The write itself must be under way: a close that overtakes a write
                # still waiting for its thread fails it, as the store is closed.
                assert await trio.to_thread.run_sync(writing.wait, REAL_DEADLINE)
                with trio.CancelScope() as scope:
                    nursery.start_soon(_cancel_when_blocked, scope)
                    await store.aclose()
            assert scope.cancelled_caught
        async with SQLiteStore(path) as other:
            assert (await other.load("queued")).last_turn == 1
    assert list((tmp_path / "sessions.db.locks").iterdir()) == []


async def _cancel_when_blocked(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()


async def test_a_failed_write_is_not_counted_as_a_commit(tmp_path: Path) -> None:
    """Statistics: ``commits`` counts groups that committed something, not attempts."""
    backend = FlakyBackend()
    store = BufferedStore(backend, name="flaky")  # type: ignore[arg-type]
    session = Session.create("s")
    async with store:
        store.attach_new(session)
        run_turn(session)
        backend.fail_next = True
        with pytest.raises(StoreError):
            await store.flush(session)
        assert store.statistics().commits == 0
        await store.flush(session)
        assert store.statistics().commits == 1
        await store.detach(session)


class _AppendingBackend(FlakyBackend):
    """A memory backend during whose first write the session gains one more event."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session: Session | None = session

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        results = super().write(batches)
        session, self.session = self.session, None
        if session is not None:
            session.append_custom("note", {"while": "writing"})
        return results


async def test_detach_commits_events_appended_while_its_flush_was_written() -> None:
    """R11.6: ``detach`` flushes until nothing is buffered; an event appended during its flush
    is committed, not dropped with the session's tracking.
    """
    session = Session.create("s")
    backend = _AppendingBackend(session)
    store = BufferedStore(backend, name="appending")  # type: ignore[arg-type]
    async with store:
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
        stored = await store.inspect("s")
    assert len(stored.events) == len(session.events)
    assert stored.events[-1].type == "note"


async def test_a_runtime_cancelled_around_a_busy_writer_still_stores_every_closed_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.9, R11.6: cancelling the scope around ``open_runtime`` (Ctrl-C) while the
    store's writer is in a commit still stores every turn the teardown closed: the
    flushes queued behind that commit are written, not refused as the store stopped."""
    path = tmp_path / "sessions.db"
    model = ScriptedModel({"hang": [Reply("first"), Hang()], "fast": [Reply("ok")]})
    real_write = SQLiteBackend.write
    hold, writing, release = threading.Event(), threading.Event(), threading.Event()

    def held_write(backend: SQLiteBackend, batches: Sequence[AppendBatch]) -> Any:
        if hold.is_set() and not writing.is_set():
            writing.set()
            release.wait(REAL_DEADLINE)
        return real_write(backend, batches)

    monkeypatch.setattr(SQLiteBackend, "write", held_write)
    agents: list[retinue.Agent] = []
    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as scope:
                async with retinue.open_runtime(models=model, store=SQLiteStore(path)) as rt:
                    hung = await rt.create_agent("a", retinue.AgentOptions(model="hang"))
                    fast = await rt.create_agent("b", retinue.AgentOptions(model="fast"))
                    agents += [hung, fast]
                    await hung.ask("one")
                    hung.send("two")  # its model hangs: the teardown closes this turn
                    hold.set()
                    fast.send("hi")  # its turn's flush holds the writer in its thread
                    assert await trio.to_thread.run_sync(writing.wait, REAL_DEADLINE)
                    nursery.start_soon(_release_when_blocked, release)
                    scope.cancel()
                    await trio.sleep_forever()
        async with SQLiteStore(path) as store:
            for agent in agents:
                assert (await store.load(agent.id)).dump() == agent.session.dump()
    assert agents[0].session.events[-1].data.reason.kind == "disposed"  # type: ignore[union-attr]


async def _release_when_blocked(release: threading.Event) -> None:
    """Let the held write finish once every task waits: the teardown's flushes are queued."""
    await trio.testing.wait_all_tasks_blocked()
    release.set()


class _CancelOnSend:
    """The writer's queue, cancelling *scope* as soon as a request is queued."""

    def __init__(self, send: Any, scope: trio.CancelScope) -> None:
        self._send, self._scope = send, scope

    def send_nowait(self, request: object) -> None:
        self._send.send_nowait(request)
        self._scope.cancel()

    def close(self) -> None:
        self._send.close()


async def test_a_group_the_writer_took_is_written_though_its_scope_is_then_cancelled(
    tmp_path: Path,
) -> None:
    """R11.6: a flush queued the moment the scope around the store is cancelled (as a
    cancelled runtime's teardown flushes) is written: the writer, woken with it, commits
    the group it took before it stops, rather than failing it halfway."""
    path = tmp_path / "sessions.db"
    session = Session.create("late")
    with trio.fail_after(REAL_DEADLINE):
        with trio.CancelScope() as scope:
            async with SQLiteStore(path) as store:
                store.attach_new(session)
                run_turn(session)
                committer = store._committer
                committer._send = _CancelOnSend(committer._send, scope)  # type: ignore[assignment]
                with trio.CancelScope(shield=True):
                    await store.flush(session)
        assert scope.cancelled_caught
        async with SQLiteStore(path) as other:
            assert (await other.load("late")).dump() == session.dump()


async def test_two_detaches_of_one_session_at_once_both_return_and_store_every_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: two ``detach`` calls of one session running at once, with events appended while the
    first flush is written, both return once the session is let go, and every event is stored: the
    second to end finds the session untracked by the first without failing with a bare
    ``KeyError``."""
    path = tmp_path / "sessions.db"
    real_write = SQLiteBackend.write
    writing, release = threading.Event(), threading.Event()

    def held_write(backend: SQLiteBackend, batches: Sequence[AppendBatch]) -> Any:
        if not release.is_set():
            writing.set()
            release.wait(REAL_DEADLINE)
        return real_write(backend, batches)

    monkeypatch.setattr(SQLiteBackend, "write", held_write)
    session = Session.create("s")
    with trio.fail_after(REAL_DEADLINE):
        async with SQLiteStore(path) as store:
            store.attach_new(session)
            run_turn(session)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(store.detach, session)
                nursery.start_soon(store.detach, session)
                await trio.to_thread.run_sync(writing.wait)
                await trio.testing.wait_all_tasks_blocked()
                run_turn(session)  # appended while the first flush is written
                release.set()
            assert store.statistics().tracked_sessions == 0
        async with SQLiteStore(path) as store:
            stored = await store.load("s")
    assert len(stored.events) == len(session.events)
