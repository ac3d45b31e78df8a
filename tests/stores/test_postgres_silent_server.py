"""PostgresStore's close returns within seconds when the server stops answering the lock
connection the store holds its claims on: a statement it waits for is ended, not waited for,
and the server drops the claims as the connection ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import run_turn
from tests.stores._postgres_locks_kit import (
    backend_of,
    drop_lock_connection,
    drops_noticed_by_use_only,
    store_session,
)
from tests.stores._postgres_silent_kit import Forwarder, cut_after

pytestmark = pytest.mark.postgres

_CLOSE_SECONDS = 10.0
_DRAIN_SECONDS = 2.0
"""The deadline of a close whose drain waits for the server: what it leaves unwritten is lost."""
_DEADLINE_MET_SECONDS = 3.0
"""How soon a claim under a deadline of a second returns: at the deadline, give or take."""
_CUT_SECONDS = 15.0
"""When the forwarder ends what a close still waits for: past the close's deadline."""


def _watchers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "retinue-postgres-claims"]


def _locks_free(dsn: str, schema: str, session_ids: list[str]) -> bool:
    """Whether another connection can take the advisory lock of every session of *schema*."""
    import psycopg

    keys = [f"{schema}.{session_id}" for session_id in session_ids]
    with psycopg.connect(dsn, autocommit=True) as conn:
        taken = [
            conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 7))", (key,)).fetchone()
            for key in keys
        ]
    return all(row == (True,) for row in taken)


async def _await_locks_free(dsn: str, schema: str, session_ids: list[str]) -> None:
    """Wait until the server has dropped the locks of *session_ids* (a backend exits soon)."""
    for _ in range(50):
        if _locks_free(dsn, schema, session_ids):
            return
        await trio.sleep(0.1)
    raise AssertionError("the server still holds the claims of the closed store")


async def _claim_sessions(store: PostgresStore, session_ids: list[str]) -> None:
    for session_id in session_ids:
        session = Session.create(session_id)
        store.attach_new(session)
        run_turn(session)
        await store.flush(session)


Prepare = Callable[[PostgresStore, trio.Nursery], Awaitable[None]]


async def _seconds_to_leave(
    store_dsn: str, schema: str, forwarder: Forwarder, deadline: float, prepare: Prepare
) -> float:
    """Open a store, *prepare* it (its waits started in the nursery given), then leave
    ``async with`` under *deadline*; the real seconds the leaving took. The forwarder is cut
    at ``_CUT_SECONDS``: a close still waiting fails the test rather than hang it."""
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:
            async with PostgresStore(store_dsn, schema=schema) as store:
                await prepare(store, nursery)
                nursery.start_soon(cut_after, forwarder, _CUT_SECONDS)
                started = time.monotonic()
                scope.deadline = trio.current_time() + deadline
        elapsed = time.monotonic() - started
        nursery.cancel_scope.cancel()
    return elapsed


async def test_postgres_a_store_holding_claims_leaves_a_silent_server_within_its_deadline(
    postgres_schema: tuple[str, str],
) -> None:
    """A store claims two sessions; then the server answers nothing more, the connections
    kept open. Leaving ``async with`` under a deadline returns within it, the watcher ended."""
    dsn, schema = postgres_schema
    forwarder = Forwarder(dsn)

    async def silenced(store: PostgresStore, _nursery: trio.Nursery) -> None:
        await _claim_sessions(store, ["one", "two"])
        forwarder.muted.set()

    try:
        elapsed = await _seconds_to_leave(
            forwarder.dsn, schema, forwarder, _CLOSE_SECONDS, silenced
        )
        assert elapsed < _CLOSE_SECONDS
        assert not _watchers()
        forwarder.close()  # the server sees the connections end, and drops their locks
        await _await_locks_free(dsn, schema, ["one", "two"])
    finally:
        forwarder.close()


async def test_postgres_a_store_leaves_a_silent_server_while_a_claim_waits_for_it(
    postgres_schema: tuple[str, str],
) -> None:
    """A store holding a claim flushes a new session once the server answers nothing more:
    its claim waits for the lock connection's answer, holding up every other claim. Leaving
    ``async with`` under a deadline cuts the drain short at the deadline, then closes within
    seconds all the same, the watcher ended."""
    dsn, schema = postgres_schema
    forwarder = Forwarder(dsn)

    async def flushing(store: PostgresStore, nursery: trio.Nursery) -> None:
        await _claim_sessions(store, ["one"])
        forwarder.muted.set()
        waiting = Session.create("waiting")
        store.attach_new(waiting)
        run_turn(waiting)
        nursery.start_soon(_flush_refused, store, waiting)
        await trio.sleep(0.5)  # its claim asks the lock connection, unanswered

    try:
        elapsed = await _seconds_to_leave(
            forwarder.dsn, schema, forwarder, _DRAIN_SECONDS, flushing
        )
        assert elapsed < _CLOSE_SECONDS
        assert not _watchers()
    finally:
        forwarder.close()


async def _flush_refused(store: PostgresStore, session: Session) -> None:
    """Flush *session*, which the store's close fails."""
    with pytest.raises(StoreError):
        await store.flush(session)


async def test_postgres_a_store_leaves_while_a_load_remakes_its_lock_connection_unanswered(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server drops the lock connection of a store holding a claim, then answers no new
    lock connection. A load finds it dropped and connects a new one, holding up every other
    claim as it waits for the server. Leaving ``async with`` under a deadline returns within
    it, the load refused: the close gives that connect up rather than wait for the load's
    cancellation."""
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stored")
    drops_noticed_by_use_only(monkeypatch)
    forwarder = Forwarder(dsn)
    forwarder.muted.set()
    port = int(forwarder.dsn.rsplit(":", 1)[1].split("/", 1)[0])

    async def loading(store: PostgresStore, nursery: trio.Nursery) -> None:
        await _claim_sessions(store, ["one"])
        claims = backend_of(store)._claims
        connect = claims._connect
        claims._connect = lambda **params: connect(**params, port=port)
        drop_lock_connection(dsn, store)
        nursery.start_soon(_load_refused, store, "stored")
        await trio.sleep(0.5)  # its claim connects, unanswered

    try:
        elapsed = await _seconds_to_leave(dsn, schema, forwarder, _CLOSE_SECONDS, loading)
        assert elapsed < _CLOSE_SECONDS
        assert not _watchers()
    finally:
        forwarder.close()


async def _load_refused(store: PostgresStore, session_id: str) -> None:
    """Load *session_id*, which the store's close fails."""
    with pytest.raises(StoreError):
        await store.load(session_id)


async def test_postgres_a_claim_behind_one_the_server_leaves_unanswered_heeds_its_deadline(
    postgres_schema: tuple[str, str],
) -> None:
    """Once the server answers nothing more, a claim of a new id waits for the lock
    connection's answer, holding up every other claim. A second claim, under a deadline,
    returns at it, and claims nothing: once the server is gone, its id is free."""
    dsn, schema = postgres_schema
    forwarder = Forwarder(dsn)
    try:
        async with trio.open_nursery() as nursery:
            async with PostgresStore(forwarder.dsn, schema=schema) as store:
                await _claim_sessions(store, ["one"])
                forwarder.muted.set()
                nursery.start_soon(_claim_refused, store, "first")
                await trio.sleep(0.5)  # its claim asks the lock connection, unanswered
                nursery.start_soon(cut_after, forwarder, _CUT_SECONDS)
                started = time.monotonic()
                with trio.move_on_after(1.0):
                    await store.claim_new("second")
                assert time.monotonic() - started < _DEADLINE_MET_SECONDS
                await trio.to_thread.run_sync(forwarder.close)
                assert not backend_of(store)._claims.holds("second")
            nursery.cancel_scope.cancel()
        await _await_locks_free(dsn, schema, ["second"])
    finally:
        forwarder.close()


async def _claim_refused(store: PostgresStore, session_id: str) -> None:
    """Claim *session_id*, which the server's end fails."""
    with pytest.raises(StoreError):
        await store.claim_new(session_id)
