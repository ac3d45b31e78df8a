"""Failed group commits and the ids a load holds: who fails, how often the storage is tried."""

from __future__ import annotations

import errno
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
import trio

from retinue._errors import InvalidJsonError, StoreError
from retinue.session import Session
from retinue.stores._backend import AppendBatch
from retinue.stores._groupcommit import GroupCommitter
from retinue.stores._memory import MemoryBackend
from retinue.stores._records import Request, Tracked
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import flush_together, open_tool_turn, run_turn


class _CountingBackend:
    """A durable-looking blocking backend over memory whose writes fail as told."""

    blocking = True
    durable = True

    def __init__(self, fail: Callable[[Sequence[AppendBatch]], BaseException | None]) -> None:
        self.inner = MemoryBackend()
        self.fail = fail
        self.writes: list[list[str]] = []

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        self.writes.append([batch.session_id for batch in batches])
        error = self.fail(batches)
        if error is not None:
            raise error
        return self.inner.write(batches)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def _sqlite_busy(tmp_path: Path) -> sqlite3.Error:
    """The error SQLite raises when another connection holds the write lock."""
    path = tmp_path / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None)
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        holder.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        holder.close()
        other.close()
    raise AssertionError("the second BEGIN IMMEDIATE was not refused")


def _sqlite_too_big() -> sqlite3.Error:
    """The error SQLite raises for one value over its length limit: one statement's."""
    conn = sqlite3.connect(":memory:")
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 10)
    try:
        conn.execute("SELECT ?", ("x" * 100,))
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("the long value was not refused")


def _store_wide_errors(tmp_path: Path) -> dict[str, BaseException]:
    import psycopg

    return {
        "sqlite busy": _sqlite_busy(tmp_path),
        "disk full": OSError(errno.ENOSPC, "No space left on device"),
        "connection lost": psycopg.OperationalError("consuming input failed: server closed"),
        "server shutdown": psycopg.errors.AdminShutdown("terminating connection"),
    }


async def _group_of_four(backend: _CountingBackend) -> dict[str, StoreError]:
    sessions = [Session.create(f"s{index}") for index in range(4)]
    async with BufferedStore(backend, name="counted") as store:  # type: ignore[arg-type]
        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        errors = await flush_together(store, sessions)
        failed = [session for session in sessions if session.id in errors]
        assert store.statistics().buffered_events == sum(len(s.events) for s in failed)
        for session in sessions:
            store._tracked.pop(session.id).unsubscribe()  # nothing left to drain on exit
    return errors


@pytest.mark.parametrize("kind", ["sqlite busy", "disk full", "connection lost", "server shutdown"])
async def test_a_group_failing_for_the_whole_store_is_tried_once(tmp_path: Path, kind: str) -> None:
    """R11.5: a write that fails for the storage itself (busy, full, disconnected) fails
    every flush of its group at once, with that error; no session is retried alone."""
    error = _store_wide_errors(tmp_path)[kind]
    backend = _CountingBackend(lambda _batches: error)
    errors = await _group_of_four(backend)
    assert [sorted(ids) for ids in backend.writes] == [["s0", "s1", "s2", "s3"]]
    assert sorted(errors) == ["s0", "s1", "s2", "s3"]
    for session_id, failure in errors.items():
        assert failure.code == "STORAGE_ERROR"
        assert repr(session_id) in failure.message
        assert type(error).__name__ in failure.message


async def test_a_split_group_stops_at_the_first_store_wide_failure() -> None:
    """R11.5: a group split to find its one bad session fails the sessions not yet
    written at once when the storage itself fails meanwhile."""

    def fail(batches: Sequence[AppendBatch]) -> BaseException:
        if len(batches) > 1:
            return InvalidJsonError("an event is not JSON")
        return OSError(errno.EIO, "Input/output error")

    backend = _CountingBackend(fail)
    errors = await _group_of_four(backend)
    assert [len(ids) for ids in backend.writes] == [4, 1]
    assert sorted(errors) == ["s0", "s1", "s2", "s3"]
    assert all("Input/output error" in error.message for error in errors.values())


async def test_a_group_failing_for_one_session_is_still_split() -> None:
    """R11.5: an error that may be one session's (here a full statement, not the store)
    still splits the group: the others commit."""

    too_big = _sqlite_too_big()

    def fail(batches: Sequence[AppendBatch]) -> BaseException | None:
        return too_big if any(batch.session_id == "s2" for batch in batches) else None

    backend = _CountingBackend(fail)
    errors = await _group_of_four(backend)
    assert list(errors) == ["s2"]
    assert [len(ids) for ids in backend.writes] == [4, 1, 1, 1, 1]


async def test_a_repair_and_a_flush_of_one_id_in_one_group_are_not_merged() -> None:
    """R11.4: a flush whose events are not written is never answered as committed, even
    when a load's repair of the same id is in its group."""
    backend = MemoryBackend()
    stored = Session.create("X")
    run_turn(stored)
    assert backend.write([AppendBatch("X", 0, tuple(stored.events), header=stored.header)]) == [
        None
    ]
    other = Session.create("X")
    run_turn(other, "a different session with the same id")
    tracked = {"X": Tracked(other, other.header, list(other.events), 0, lambda: None)}
    committer = GroupCommitter(backend, "memory", tracked, threads=trio.CapacityLimiter(1))
    repair = Request("X", prebuilt=AppendBatch("X", len(stored.events), ()))
    flush = Request("X")
    await committer._commit([repair, flush])
    assert repair.error is None
    assert flush.error is not None
    assert flush.error.code == "SESSION_TRACKED"
    assert tracked["X"].buffer == list(other.events)


class _SlowClaims:
    """A blocking memory backend whose claim waits until the test lets it go."""

    blocking = True
    durable = True

    def __init__(self) -> None:
        self.inner = MemoryBackend()
        self.claiming = trio.Event()
        self.go = threading.Event()

    def claim(self, session_id: str) -> None:
        trio.from_thread.run_sync(self.claiming.set)
        assert self.go.wait(10)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def _stored(backend: _SlowClaims, session: Session) -> None:
    batch = AppendBatch(session.id, 0, tuple(session.events), header=session.header)
    assert backend.inner.write([batch]) == [None]


async def _while_loading(
    store: BufferedStore, backend: _SlowClaims, attempt: Callable[[], Awaitable[object]]
) -> tuple[StoreError, Session]:
    """Run *attempt* while a load of ``X`` waits in its claim; its refusal and the loaded session."""
    loaded: list[Session] = []
    async with trio.open_nursery() as nursery:

        async def load() -> None:
            loaded.append(await store.load("X"))

        nursery.start_soon(load)
        await backend.claiming.wait()
        try:
            with pytest.raises(StoreError) as caught:
                await attempt()
        finally:
            backend.go.set()
    return caught.value, loaded[0]


async def test_attaching_an_id_while_it_is_loaded_is_refused() -> None:
    """R11.3: while a load of an id runs (its repair will write that id), attaching a new
    session with the id is refused; once the load is over the loaded session attaches."""
    backend = _SlowClaims()
    crashed = Session.create("X")
    run_turn(crashed)
    open_tool_turn(crashed)
    _stored(backend, crashed)
    async with BufferedStore(backend, name="slow") as store:  # type: ignore[arg-type]

        async def attach_new() -> None:
            store.attach_new(Session.create("X"))

        refused, loaded = await _while_loading(store, backend, attach_new)
        assert refused.code == "SESSION_TRACKED"
        assert "'X'" in refused.message
        store.attach(loaded)
        await store.detach(loaded)
    assert len(loaded.events) > len(crashed.events)


async def test_a_second_load_of_an_id_being_loaded_is_refused() -> None:
    """R11.3: two loads of one id at once: the second is refused, so the first's caller can attach."""
    backend = _SlowClaims()
    stored = Session.create("X")
    run_turn(stored)
    _stored(backend, stored)
    async with BufferedStore(backend, name="slow") as store:  # type: ignore[arg-type]
        refused, loaded = await _while_loading(store, backend, lambda: store.load("X"))
        assert refused.code == "SESSION_TRACKED"
        assert "being loaded" in refused.message
        store.attach(loaded)
        await store.detach(loaded)
