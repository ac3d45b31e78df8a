"""PostgresStore handovers: a claim waiting for a session's previous writer's last commit, and what
it holds up, its deadline, a close, a create in flight."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from retinue.stores._backend import AppendBatch
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import run_turn
from tests.stores._postgres_locks_kit import (
    backend_of,
    drop_lock_connection,
    drops_noticed_by_use_only,
    store_session,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _drops_noticed_by_use_only(monkeypatch: pytest.MonkeyPatch) -> None:
    drops_noticed_by_use_only(monkeypatch)


def _hold_commits(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Event, threading.Event]:
    """Make *store*'s commits hold once their rows are written: (reached, finish) events."""
    tables = backend_of(store)._tables
    append, reached, finish = tables._append, threading.Event(), threading.Event()

    def append_then_hold(conn: object, batches: list[AppendBatch]) -> None:
        append(conn, batches)  # type: ignore[arg-type]
        reached.set()
        finish.wait(30)

    monkeypatch.setattr(tables, "_append", append_then_hold)
    return reached, finish


@contextmanager
def _row_held(dsn: str, schema: str, session_id: str) -> Iterator[Callable[[], None]]:
    """Hold a session's row in another connection's transaction, as a previous writer's
    commit still in flight would; yields the function that lets go of it.

    Let go after 5 s at the latest, so that a store waiting for it makes its
    test fail rather than hang.
    """
    import psycopg

    blocker = psycopg.connect(dsn)
    let_go = threading.Timer(5, blocker.rollback)
    try:
        blocker.execute(
            f'SELECT 1 FROM "{schema}".retinue_sessions WHERE id = %s FOR UPDATE', (session_id,)
        )
        let_go.start()

        def release() -> None:
            let_go.cancel()
            blocker.rollback()

        yield release
    finally:
        let_go.cancel()
        blocker.close()


def _with_isolation(dsn: str, isolation: str) -> str:
    """*dsn*, its sessions' default transaction isolation set to *isolation* unless "default"."""
    from psycopg.conninfo import make_conninfo

    if isolation == "default":
        return dsn
    return make_conninfo(dsn, options=f"-c default_transaction_isolation={isolation}")


ISOLATIONS = pytest.mark.parametrize("isolation", ["default", "serializable"])
"""The database's default isolation: the store's transactions keep their own whatever it is."""


@ISOLATIONS
async def test_postgres_load_waits_for_the_previous_writers_last_commit(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    isolation: str,
) -> None:
    """R11.8, R12.7: a load that takes over a session reads its previous writer's last commit.

    A killed process's lock connection can end while its write connection is
    still committing. The lock is free then, but the log is not final: a load
    reading it at once would miss that commit, and its repair would be refused.
    With a database whose default isolation is serializable the wait ends as
    well, not with a serialization failure.
    """
    dsn, schema = postgres_schema
    dsn = _with_isolation(dsn, isolation)
    await store_session(dsn, schema, "handover")
    async with (
        PostgresStore(dsn, schema=schema) as previous,
        PostgresStore(dsn, schema=schema) as successor,
    ):
        session = await previous.load("handover")
        previous.attach(session)
        run_turn(session)
        reached, finish = _hold_commits(previous, monkeypatch)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(previous.flush, session)
                await trio.to_thread.run_sync(reached.wait, 30)
                drop_lock_connection(dsn, previous)
                loaded: list[Session] = []

                async def take_over() -> None:
                    loaded.append(await successor.load("handover"))

                nursery.start_soon(take_over)
                await trio.sleep(0.3)
                finish.set()
        finally:
            finish.set()
        assert loaded[0].last_turn == 2
        assert len(loaded[0].events) == len(session.events)


def _wait_for_a_blocked_statement(dsn: str) -> None:
    """Return once some backend waits on a row lock (a claim's handover has begun)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(300):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)  # noqa: TID251 - a worker thread, polling the server
    raise AssertionError("no claim started waiting for the row lock")


async def test_postgres_handover_wait_does_not_hold_up_other_sessions(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a claim waiting for a session's previous writer stalls no other session.

    While one load waits (up to its handover timeout) for a commit that still
    holds its session's row, the same store flushes, loads and detaches other
    sessions at once.
    """
    dsn, schema = postgres_schema
    for session_id in ("stuck", "busy", "third"):
        await store_session(dsn, schema, session_id)
    async with PostgresStore(dsn, schema=schema) as store:
        busy = await store.load("busy")
        store.attach(busy)
        loaded: list[Session] = []

        async def take_over() -> None:
            loaded.append(await store.load("stuck"))

        with _row_held(dsn, schema, "stuck") as release:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(take_over)
                await trio.to_thread.run_sync(_wait_for_a_blocked_statement, dsn)
                started = trio.current_time()
                run_turn(busy)
                await store.flush(busy)
                await store.detach(busy)
                third = await store.load("third")
                store.attach(third)
                await store.detach(third)
                assert trio.current_time() - started < 2
                assert not loaded
                release()
        assert loaded[0].last_turn == 1
    async with PostgresStore(dsn, schema=schema) as other:
        assert (await other.load("busy")).last_turn == 2
        assert (await other.load("third")).last_turn == 1


async def test_postgres_lock_connection_replaced_during_a_handover_is_retaken(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a claim whose lock connection is replaced while it waits takes its lock again.

    The lock it took went with the old connection; the claim holds the session
    on the new one, so another store is refused it until it is detached.
    """
    dsn, schema = postgres_schema
    for session_id in ("stuck", "busy"):
        await store_session(dsn, schema, session_id)
    async with PostgresStore(dsn, schema=schema) as store:
        busy = await store.load("busy")
        store.attach(busy)
        loaded: list[Session] = []

        async def take_over() -> None:
            loaded.append(await store.load("stuck"))

        with _row_held(dsn, schema, "stuck") as release:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(take_over)
                await trio.to_thread.run_sync(_wait_for_a_blocked_statement, dsn)
                drop_lock_connection(dsn, store)
                run_turn(busy)
                await store.flush(busy)  # notices the drop: a new lock connection
                release()
        stuck = loaded[0]
        store.attach(stuck)
        async with PostgresStore(dsn, schema=schema) as other:
            with pytest.raises(StoreError) as refused:
                await other.load("stuck")
            assert refused.value.code == "SESSION_LOCKED"
            await store.detach(stuck)
            assert (await other.load("stuck")).last_turn == 1


async def test_postgres_claims_of_one_session_during_its_handover_lock_it_once(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a second claim of a session waits for the claim in progress, then holds it.

    Advisory locks stack: had both taken the lock, one release would leave it held.
    """
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stuck")
    backend = PostgresBackend(dsn, schema=schema)
    backend.open()
    try:
        with _row_held(dsn, schema, "stuck") as release:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, backend.claim, "stuck")
                await trio.to_thread.run_sync(_wait_for_a_blocked_statement, dsn)
                nursery.start_soon(trio.to_thread.run_sync, backend.claim, "stuck")
                await trio.sleep(0.2)
                release()
        await trio.to_thread.run_sync(backend.release, "stuck")
        async with PostgresStore(dsn, schema=schema) as other:
            assert (await other.load("stuck")).last_turn == 1
    finally:
        backend.close()


async def test_postgres_close_does_not_wait_for_a_handover(
    postgres_schema: tuple[str, str],
) -> None:
    """Closing while a claim waits for its handover returns at once; the claim then fails."""
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stuck")
    backend = PostgresBackend(dsn, schema=schema)
    backend.open()
    failures: list[StoreError] = []

    def claim() -> None:
        try:
            backend.claim("stuck")
        except StoreError as exc:
            failures.append(exc)

    try:
        with _row_held(dsn, schema, "stuck") as release:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, claim)
                await trio.to_thread.run_sync(_wait_for_a_blocked_statement, dsn)
                started = trio.current_time()
                await trio.to_thread.run_sync(backend.close)
                assert trio.current_time() - started < 2
                release()
        assert [failure.code for failure in failures] == ["STORE_CLOSED"]
        async with PostgresStore(dsn, schema=schema) as other:
            assert (await other.load("stuck")).last_turn == 1
    finally:
        backend.close()


@ISOLATIONS
async def test_postgres_create_meeting_a_create_in_flight_is_refused_as_existing(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    isolation: str,
) -> None:
    """R11.3: a create that meets another writer's create of the same id still committing
    (its process killed, so its lock is gone) waits for it and is refused with
    ``SESSION_ALREADY_EXISTS``, not a storage error, whatever the database's default
    isolation; the first create's events are stored."""
    dsn, schema = postgres_schema
    dsn = _with_isolation(dsn, isolation)
    first, twin = Session.create("race"), Session.create("race")
    codes: list[str | None] = []
    async with (
        PostgresStore(dsn, schema=schema) as previous,
        PostgresStore(dsn, schema=schema) as successor,
    ):
        previous.attach_new(first)
        run_turn(first)
        reached, finish = _hold_commits(previous, monkeypatch)

        async def create() -> None:
            with pytest.raises(StoreError) as caught:
                await successor.flush(twin)
            codes.append(caught.value.code)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(previous.flush, first)
                await trio.to_thread.run_sync(reached.wait, 30)
                drop_lock_connection(dsn, previous)
                successor.attach_new(twin)
                run_turn(twin)
                nursery.start_soon(create)
                await trio.to_thread.run_sync(_wait_for_a_blocked_statement, dsn)
                finish.set()
        finally:
            finish.set()
        assert codes == ["SESSION_ALREADY_EXISTS"]
        with pytest.raises(StoreError):
            await successor.aclose()
    async with PostgresStore(dsn, schema=schema) as reader:
        stored = await reader.inspect("race")
    assert len(stored.events) == len(first.events)


def _sockets_held() -> int:
    """How many sockets this process holds: its connections to the server among them.

    Counted here, not on the server, whose count moves with other clients of it."""
    held = 0
    for name in os.listdir("/proc/self/fd"):
        with suppress(OSError):  # the directory's own descriptor, gone once listed
            held += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
    return held


async def test_postgres_load_waiting_for_a_handover_honours_its_deadline(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a load waiting for the previous writer's last commit stops at its deadline,
    not when the wait times out; it leaves no claim and no extra connection behind, so the
    session loads once the commit is over."""
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stuck")
    async with PostgresStore(dsn, schema=schema) as store:
        await store.list()  # its reader connection is made
        with _row_held(dsn, schema, "stuck") as release:
            connections = _sockets_held()
            started = trio.current_time()
            with trio.move_on_after(0.5) as scope:
                await store.load("stuck")
            assert scope.cancelled_caught
            assert trio.current_time() - started < 2
            assert _sockets_held() == connections
            release()
        assert not backend_of(store)._claims.holds("stuck")
        async with PostgresStore(dsn, schema=schema) as other:
            loaded = await other.load("stuck")
            assert loaded.last_turn == 1
            await other.detach(loaded)
        assert (await store.load("stuck")).last_turn == 1


async def test_postgres_store_closed_under_a_deadline_does_not_wait_for_a_writes_handover(
    postgres_schema: tuple[str, str],
) -> None:
    """A store left under a deadline while its writer waits for a session's previous writer
    (a commit still in flight elsewhere) closes at once: the wait ends with the store and
    the write fails, rather than holding the exit until the wait times out. The stored log
    is the previous writer's, and loads once that commit is over."""
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stuck")
    with _row_held(dsn, schema, "stuck") as release:
        started = trio.current_time()
        with trio.move_on_after(0.5) as scope:
            async with PostgresStore(dsn, schema=schema) as store:
                copy = await store.inspect("stuck")
                store.attach(copy)
                run_turn(copy)
                await store.flush(copy)
        assert scope.cancelled_caught
        assert trio.current_time() - started < 2
        release()
    async with PostgresStore(dsn, schema=schema) as other:
        assert (await other.load("stuck")).last_turn == 1
