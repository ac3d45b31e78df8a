"""PostgresStore writer locks: a dropped lock connection, and a load cancelled while repairing."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session, TurnEnd
from retinue.stores import PostgresStore
from retinue.stores._backend import AppendBatch
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import flush_together, open_tool_turn, run_turn

pytestmark = pytest.mark.postgres


def _backend(store: PostgresStore) -> PostgresBackend:
    backend = store._backend
    assert isinstance(backend, PostgresBackend)
    return backend


def _hold_commits(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Event, threading.Event]:
    """Make *store*'s commits hold once their rows are written: (reached, finish) events."""
    tables = _backend(store)._tables
    append, reached, finish = tables._append, threading.Event(), threading.Event()

    def append_then_hold(conn: object, batches: list[AppendBatch]) -> None:
        append(conn, batches)  # type: ignore[arg-type]
        reached.set()
        finish.wait(30)

    monkeypatch.setattr(tables, "_append", append_then_hold)
    return reached, finish


async def _store(dsn: str, schema: str, session_id: str, *, open_turn: bool = False) -> None:
    session = Session.create(session_id)
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        if open_turn:
            open_tool_turn(session)
        await store.detach(session)


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


def _drop_lock_connection(dsn: str, store: PostgresStore) -> None:
    """End the store's lock connection on the server, as a restart or a network cut does.

    Returns once the backend is gone, its locks with it (PostgreSQL 14+ waits up to the
    timeout given; terminating alone only asks the backend to exit).
    """
    import psycopg

    pid = _backend(store)._claims._locker.info.backend_pid
    with psycopg.connect(dsn, autocommit=True) as conn:
        ended = conn.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,)).fetchone()
    assert ended == (True,)


def _notice_drop(store: PostgresStore) -> None:
    """Run a statement on the dropped lock connection, as the store's next use of it would."""
    import psycopg

    with pytest.raises(psycopg.OperationalError):
        _backend(store)._claims._locker.execute("SELECT 1")


async def test_postgres_load_after_the_lock_connection_dropped_reconnects(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a lock connection the server dropped is reconnected by the next load."""
    dsn, schema = postgres_schema
    await _store(dsn, schema, "quiet")
    async with PostgresStore(dsn, schema=schema) as store:
        _drop_lock_connection(dsn, store)
        loaded = await store.load("quiet")
        assert loaded.last_turn == 1


async def test_postgres_reconnected_lock_is_held_once(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: after a reconnect, a retaken lock is not taken twice, so one release frees it.

    The other session's lock, taken by another store while the connection was
    down, stays theirs: this store may no longer write it.
    """
    dsn, schema = postgres_schema
    for session_id in ("lost", "kept"):
        await _store(dsn, schema, session_id)
    async with (
        PostgresStore(dsn, schema=schema) as store,
        PostgresStore(dsn, schema=schema) as other,
    ):
        lost = await store.load("lost")
        store.attach(lost)
        await store.load("kept")
        _drop_lock_connection(dsn, store)
        await other.load("lost")
        _notice_drop(store)
        kept = await store.load("kept")
        store.attach(kept)
        await store.detach(kept)
        async with PostgresStore(dsn, schema=schema) as third:
            assert (await third.load("kept")).last_turn == 1
        run_turn(lost)
        with pytest.raises(StoreError) as refused:
            await store.flush(lost)
        assert refused.value.code == "SESSION_LOCKED"
        with pytest.raises(StoreError):
            await store.aclose()


async def test_postgres_load_cancelled_during_its_repair_leaves_no_lock(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R12.7: a load cancelled while its repair is being written gives the lock up after it.

    The write claims the session: a release before it ends would leave a lock
    nobody owns, and every other store would be refused the session.
    """
    dsn, schema = postgres_schema
    await _store(dsn, schema, "crashed", open_turn=True)
    async with PostgresStore(dsn, schema=schema) as store:
        backend = _backend(store)
        write = backend.write
        with trio.CancelScope() as scope:

            def cancel_then_write(batches: Sequence[AppendBatch]) -> object:
                trio.from_thread.run_sync(scope.cancel)
                deadline = time.monotonic() + 0.5
                while backend._claims.holds("crashed") and time.monotonic() < deadline:
                    time.sleep(0.01)  # noqa: TID251 - a worker thread, giving the release its chance
                return write(batches)

            monkeypatch.setattr(backend, "write", cancel_then_write)
            await store.load("crashed")
        monkeypatch.undo()
        assert scope.cancelled_caught
        # The cancelled load returned only once its repair was written.
        assert isinstance((await store.inspect("crashed")).events[-1].data, TurnEnd)
        async with PostgresStore(dsn, schema=schema) as other:
            assert (await other.load("crashed")).last_turn == 2


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
    await _store(dsn, schema, "handover")
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
                _drop_lock_connection(dsn, previous)
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


async def test_postgres_stores_in_different_schemas_do_not_lock_each_other(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: the writer lock belongs to a schema's session, not to every session of that id."""
    import psycopg

    dsn, schema = postgres_schema
    neighbour = f"{schema}_n"
    try:
        async with (
            PostgresStore(dsn, schema=schema) as store,
            PostgresStore(dsn, schema=neighbour) as other,
        ):
            mine, theirs = Session.create("main"), Session.create("main")
            store.attach_new(mine)
            other.attach_new(theirs)
            run_turn(mine)
            run_turn(theirs)
            await store.flush(mine)
            await other.flush(theirs)
            await store.detach(mine)
            await other.detach(theirs)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{neighbour}" CASCADE')


async def test_postgres_detach_cancelled_after_its_flush_gives_up_the_lock(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R12.7: a detach cancelled once it stopped tracking the session still releases its claim."""
    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    session = Session.create("detached")
    store.attach_new(session)
    run_turn(session)
    backend = _backend(store)
    write = backend.write
    with trio.CancelScope() as scope:

        def write_then_cancel(batches: Sequence[AppendBatch]) -> object:
            result = write(batches)
            trio.from_thread.run_sync(scope.cancel)
            return result

        monkeypatch.setattr(backend, "write", write_then_cancel)
        await store.detach(session)
    monkeypatch.undo()
    assert "detached" not in store._tracked
    async with PostgresStore(dsn, schema=schema) as other:
        assert (await other.load("detached")).last_turn == 1
    await store.aclose()


async def test_postgres_load_of_an_unstored_id_does_not_lock_out_its_creator(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.3, R12.7: a probe for an id not yet stored takes no lock its creator would meet."""
    dsn, schema = postgres_schema
    async with (
        PostgresStore(dsn, schema=schema) as creator,
        PostgresStore(dsn, schema=schema) as prober,
    ):
        await prober.list()
        with pytest.raises(StoreError) as caught:
            await trio.to_thread.run_sync(_backend(prober).claim, "new")
        assert caught.value.code == "SESSION_NOT_FOUND"
        session = Session.create("new")
        creator.attach_new(session)
        run_turn(session)
        await creator.detach(session)
        assert await prober.exists("new")


async def test_postgres_commit_is_refused_when_its_lock_was_lost_after_the_probe(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: the lock is checked inside the write transaction. A lock connection that drops
    between the probe and the commit lets another store claim and read the session; the first
    store's commit is then refused (its events stay buffered), so the log that store read is
    still the stored one: never two writers.
    """
    dsn, schema = postgres_schema
    await _store(dsn, schema, "x")
    async with (
        PostgresStore(dsn, schema=schema) as first,
        PostgresStore(dsn, schema=schema) as second,
    ):
        live = await first.load("x")
        first.attach(live)
        run_turn(live)
        claims, other = _backend(first)._claims, _backend(second)
        probe = claims.probe
        read: list[int] = []

        def probe_then_lose_the_lock() -> None:
            claims.probe = probe  # type: ignore[method-assign]
            probe()
            _drop_lock_connection(dsn, first)
            other.claim("x")
            stored = other.read("x")
            assert stored is not None
            read.append(len(stored.records))

        claims.probe = probe_then_lose_the_lock  # type: ignore[method-assign]
        with pytest.raises(StoreError) as refused:
            await first.flush(live)
        assert refused.value.code == "SESSION_LOCKED"
        stored = other.read("x")
        assert stored is not None
        assert len(stored.records) == read[0] < len(live.events)
        assert first.statistics().buffered_events > 0
        other.release("x")
        await first.flush(live)  # the lock retaken, the buffered events commit
        await first.detach(live)
        stored = other.read("x")
        assert stored is not None
        assert len(stored.records) == len(live.events)


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
        await _store(dsn, schema, session_id)
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
        await _store(dsn, schema, session_id)
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
                _drop_lock_connection(dsn, store)
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
    await _store(dsn, schema, "stuck")
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
    await _store(dsn, schema, "stuck")
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


class _CutOff:
    """A lock connection cut off on the client's side only (say, by a load balancer's idle
    timeout): the store finds it broken, while its backend lives on holding its locks."""

    broken = True

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.closed = False

    def close(self) -> None:
        self.closed = True  # the server is not told: the backend stays

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


async def test_postgres_lock_connection_cut_off_with_its_backend_alive_keeps_its_sessions(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: when the lock connection is cut off but the server still runs its backend, the
    remade connection ends that backend, which holds this store's own locks, and retakes
    them: the store's sessions are not refused as written by another process for as long as
    the server takes to notice (its TCP keepalive: hours by default)."""
    dsn, schema = postgres_schema
    session = Session.create("mine")
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        await store.flush(session)
        claims = _backend(store)._claims
        backend = claims._locker
        assert backend is not None
        claims._locker = _CutOff(backend)  # type: ignore[assignment]
        try:
            run_turn(session)
            await store.flush(session)
            async with PostgresStore(dsn, schema=schema) as other:
                with pytest.raises(StoreError) as caught:
                    await other.load("mine")
                assert caught.value.code == "SESSION_LOCKED"
            await store.detach(session)
        finally:
            backend.close()
    async with PostgresStore(dsn, schema=schema) as store:
        assert len((await store.inspect("mine")).events) == len(session.events)


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
                _drop_lock_connection(dsn, previous)
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


async def test_postgres_concurrent_creates_of_one_id_refuse_the_later_as_existing(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.3: of two stores creating the same id at once one commits; the other is refused
    with ``SESSION_ALREADY_EXISTS``, as in the other stores, whichever claimed it first."""
    dsn, schema = postgres_schema
    outcomes: list[str] = []

    async def create(store: PostgresStore) -> None:
        session = Session.create("twice")
        store.attach_new(session)
        run_turn(session)
        try:
            await store.flush(session)
        except StoreError as exc:
            outcomes.append(str(exc.code))
        else:
            outcomes.append("stored")

    async with (
        PostgresStore(dsn, schema=schema) as one,
        PostgresStore(dsn, schema=schema) as two,
    ):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(create, one)
            nursery.start_soon(create, two)
        assert sorted(outcomes) == ["SESSION_ALREADY_EXISTS", "stored"]
        for store in (one, two):
            with contextlib.suppress(StoreError):
                await store.aclose()


def _client_connections(dsn: str) -> int:
    """How many client connections the server has, this query's own left out."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_postgres_load_waiting_for_a_handover_honours_its_deadline(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a load waiting for the previous writer's last commit stops at its deadline,
    not when the wait times out; it leaves no claim and no extra connection behind, so the
    session loads once the commit is over."""
    dsn, schema = postgres_schema
    await _store(dsn, schema, "stuck")
    async with PostgresStore(dsn, schema=schema) as store:
        await store.list()  # its reader connection is made
        with _row_held(dsn, schema, "stuck") as release:
            connections = await trio.to_thread.run_sync(_client_connections, dsn)
            started = trio.current_time()
            with trio.move_on_after(0.5) as scope:
                await store.load("stuck")
            assert scope.cancelled_caught
            assert trio.current_time() - started < 2
            assert await trio.to_thread.run_sync(_client_connections, dsn) == connections
            release()
        assert not _backend(store)._claims.holds("stuck")
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
    await _store(dsn, schema, "stuck")
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


@contextmanager
def _table_locked(dsn: str, schema: str, table: str) -> Iterator[Callable[[], None]]:
    """Hold *table* in ACCESS EXCLUSIVE mode in another connection's transaction, as a
    migration or a hand-run ``LOCK TABLE`` does; yields the function that lets go of it.

    Let go after 20 s at the latest, so that a store waiting for it makes its test fail
    rather than hang.
    """
    import psycopg

    blocker = psycopg.connect(dsn)
    let_go = threading.Timer(20, blocker.rollback)
    try:
        blocker.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS EXCLUSIVE MODE')
        let_go.start()

        def release() -> None:
            let_go.cancel()
            blocker.rollback()

        yield release
    finally:
        let_go.cancel()
        blocker.close()


def _count_commits(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the transactions *store* starts to write a group: a list holding the count."""
    backend = _backend(store)
    commit, count = backend._commit_group, [0]

    def counted(batches: Sequence[AppendBatch], results: list[StoreError | None]) -> None:
        count[0] += 1
        commit(batches, results)

    monkeypatch.setattr(backend, "_commit_group", counted)
    return count


@pytest.mark.parametrize("table", ["retinue_sessions", "retinue_segments"])
async def test_postgres_table_locked_elsewhere_fails_the_group_once_naming_the_lock(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    """R11.5: a lock on one of the store's tables held by another transaction stops every
    session's commit alike. The group fails once, after one lock timeout, with TABLE_LOCKED
    naming the table and the lock, rather than being split and waiting out the timeout again for each
    session; the events stay buffered and are committed once the lock is gone."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    sessions = [Session.create(session_id) for session_id in ("a", "b", "c")]
    async with PostgresStore(dsn, schema=schema) as store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        assert await flush_together(store, sessions) == {}
        commits = _count_commits(store, monkeypatch)
        for session in sessions:
            run_turn(session)
        with _table_locked(dsn, schema, table):
            errors = await flush_together(store, sessions)
        assert sorted(errors) == ["a", "b", "c"]
        for error in errors.values():
            assert error.code == "TABLE_LOCKED"
            assert f'"{schema}".{table} (AccessExclusiveLock by pid ' in error.message
        assert commits == [1]
        assert await flush_together(store, sessions) == {}
        for session in sessions:
            await store.detach(session)
        for session in sessions:
            assert len((await store.inspect(session.id)).events) == len(session.events)


async def test_postgres_creates_meeting_a_table_lock_are_not_refused_as_existing(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3, R11.5: new sessions whose first flush meets a lock on the sessions table held
    by another transaction fail together with TABLE_LOCKED naming the table, after one
    wait: not each after its own wait, and not SESSION_ALREADY_EXISTS (or SESSION_LOCKED)
    for ids nobody stored. Their locks are given up, and they are created once the lock
    is gone."""
    import retinue.stores._pgclaims as pgclaims

    monkeypatch.setattr(pgclaims, "_HANDOVER_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    sessions = [Session.create(session_id) for session_id in ("a", "b", "c")]
    async with PostgresStore(dsn, schema=schema) as store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        with _table_locked(dsn, schema, "retinue_sessions"):
            started = trio.current_time()
            errors = await flush_together(store, sessions)
            assert trio.current_time() - started < 0.3 * len(sessions)
        assert sorted(errors) == ["a", "b", "c"]
        for error in errors.values():
            assert error.code == "TABLE_LOCKED"
            assert f'"{schema}".retinue_sessions' in error.message
        assert not any(_backend(store)._claims.holds(session.id) for session in sessions)
        assert await flush_together(store, sessions) == {}
        for session in sessions:
            await store.detach(session)
            assert len((await store.inspect(session.id)).events) == len(session.events)


async def test_postgres_reads_meeting_a_table_lock_fail_naming_it_rather_than_wait_on(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5: a listing, a lookup or a read that meets an exclusive lock on the store's
    tables held by another transaction fails with TABLE_LOCKED naming the table once the
    store's lock timeout is over, as a commit does, instead of waiting in its worker
    thread, past any deadline, for as long as that transaction lasts."""
    import retinue.stores._pgreaders as readers

    monkeypatch.setattr(readers, "_READ_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    await _store(dsn, schema, "stored")
    async with PostgresStore(dsn, schema=schema, create=False) as store:
        reads: list[Callable[[], Any]] = [
            store.list,
            lambda: store.exists("stored"),
            lambda: store.inspect("stored"),
        ]
        with _table_locked(dsn, schema, "retinue_sessions"):
            for read in reads:
                started = trio.current_time()
                with pytest.raises(StoreError) as caught:
                    await read()
                assert caught.value.code == "TABLE_LOCKED"
                assert f'"{schema}".retinue_sessions' in caught.value.message
                assert trio.current_time() - started < 5
        assert [header.id for header in await store.list()] == ["stored"]


async def test_postgres_group_whose_every_batch_is_refused_opens_no_transaction(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3, R11.5: a flush refused when claiming its session (an id another store holds)
    writes nothing, so it starts no transaction: it is refused at once with
    SESSION_ALREADY_EXISTS even while another transaction holds a lock on the sessions
    table. It waited out the lock timeout in an empty transaction and failed with
    TABLE_LOCKED instead, naming a lock that had nothing to do with it."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    held, second = Session.create("taken"), Session.create("taken")
    async with (
        PostgresStore(dsn, schema=schema) as holder,
        PostgresStore(dsn, schema=schema) as store,
    ):
        holder.attach_new(held)
        run_turn(held)
        await holder.flush(held)
        store.attach_new(second)
        run_turn(second)
        commits = _count_commits(store, monkeypatch)
        with (
            _table_locked(dsn, schema, "retinue_sessions"),
            pytest.raises(StoreError) as caught,
        ):
            await store.flush(second)
        assert caught.value.code == "SESSION_ALREADY_EXISTS"
        assert "'taken'" in caught.value.message
        assert commits == [0]
        store._tracked.pop("taken").unsubscribe()  # refused: nothing left to drain on exit
        await holder.detach(held)
