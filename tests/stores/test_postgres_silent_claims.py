"""A cancelled claim of a PostgresStore returns within seconds though the server stops
answering the statement it waits for: once its worker thread has had a moment to end on its
own, that statement is ended. On a server that answers, a cancel ends nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
import trio

from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import REAL_DEADLINE, run_turn
from tests.stores._postgres_locks_kit import backend_of, store_session
from tests.stores._postgres_silent_kit import Forwarder, cut_after

pytestmark = pytest.mark.postgres

_CANCELLED_AFTER = 0.5
_RETURNED_WITHIN = 5.0
"""Real seconds a cancelled claim takes to return on a silent server: its thread's grace, then
the end of the statement it waits for."""
_DECODING = 3.0
"""Real seconds a slow load's thread keeps working after its claim, past the cancel's grace."""
_CUT_SECONDS = 20.0
"""When the forwarder ends what a claim still waits for: a test of it then fails, not hangs."""


async def _live_session(store: PostgresStore) -> Session:
    """A new session "live" in *store*, a turn of it stored: the store claims it."""
    live = Session.create("live")
    store.attach_new(live)
    run_turn(live)
    await store.flush(live)
    return live


async def _cancelled_once_silent(
    forwarder: Forwarder, nursery: trio.Nursery, call: Callable[[], Awaitable[object]]
) -> None:
    """Silence the server, run *call* and cancel it after a moment: it must return within
    seconds (the connections are cut for good later, by *nursery*'s task)."""
    forwarder.muted.set()
    nursery.start_soon(cut_after, forwarder, _CUT_SECONDS)
    started = time.monotonic()
    with trio.move_on_after(_CANCELLED_AFTER):
        await call()
    assert time.monotonic() - started < _RETURNED_WITHIN


async def test_postgres_a_cancelled_claim_of_a_new_id_leaves_a_silent_server_within_seconds(
    postgres_schema: tuple[str, str],
) -> None:
    """The server answers nothing more; a claim of a new id waits for the lock connection's
    answer to its probe. Cancelled, it returns within seconds, the id claimed by no one."""
    dsn, schema = postgres_schema
    forwarder = Forwarder(dsn)
    try:
        async with trio.open_nursery() as nursery:
            async with PostgresStore(forwarder.dsn, schema=schema) as store:
                session = Session.create("one")
                store.attach_new(session)
                run_turn(session)
                await store.flush(session)
                await _cancelled_once_silent(forwarder, nursery, partial(store.claim_new, "new"))
                assert not backend_of(store)._claims.holds("new")
                assert "new" not in store._claimed_new
                await trio.to_thread.run_sync(forwarder.close)
            nursery.cancel_scope.cancel()
    finally:
        forwarder.close()


async def test_postgres_a_cancelled_load_leaves_a_silent_server_within_seconds(
    postgres_schema: tuple[str, str],
) -> None:
    """The server answers nothing more; a load asks a pooled reader whether the session is
    stored, unanswered. Cancelled, it returns within seconds, holding no claim; the lock
    connection, which it was not waiting for, is kept."""
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stored")
    forwarder = Forwarder(dsn)
    try:
        async with trio.open_nursery() as nursery:
            async with PostgresStore(forwarder.dsn, schema=schema) as store:
                assert await store.exists("stored")  # pools a reader connection
                locker = backend_of(store)._claims._locker
                await _cancelled_once_silent(forwarder, nursery, partial(store.load, "stored"))
                assert not backend_of(store)._claims.holds("stored")
                assert backend_of(store)._claims._locker is locker
                assert locker is not None
                assert not locker.broken
                await trio.to_thread.run_sync(forwarder.close)
            nursery.cancel_scope.cancel()
    finally:
        forwarder.close()


async def test_postgres_a_load_cancelled_on_a_server_that_answers_keeps_the_claims(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load whose claim waits for another transaction's lock on the session's row (a
    previous writer's commit) is cancelled: it returns, claiming nothing, and the lock
    connection, holding another session's claim, is kept, however long it had waited."""
    import psycopg

    import retinue.stores._groupcommit as groupcommit

    monkeypatch.setattr(groupcommit, "CLAIM_GRACE_SECONDS", 0.05)
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "stored")
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            live = await _live_session(store)
            locker = backend_of(store)._claims._locker
            with psycopg.connect(dsn) as holder:
                holder.execute(
                    f'SELECT 1 FROM "{schema}".retinue_sessions WHERE id = %s FOR UPDATE',
                    ("stored",),
                )
                with trio.move_on_after(_CANCELLED_AFTER):
                    await store.load("stored")
                holder.rollback()
            claims = backend_of(store)._claims
            assert claims._locker is locker
            assert not locker.broken
            assert claims.holds("live")
            assert not claims.holds("stored")
            run_turn(live)
            await store.flush(live)


async def test_postgres_a_claim_that_ends_taken_after_its_cancel_is_returned_held(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel landing while a claim's thread runs, on a server that answers, waits for the
    thread: a claim it takes is returned, held and known to the store, for the caller to
    release, the cancel coming at the caller's next checkpoint; raised instead, it would be
    held by the lock connection with no one to release it."""
    from retinue.stores._postgres import PostgresBackend

    claim_new = PostgresBackend.claim_new

    def slow_claim_new(backend: PostgresBackend, session_id: str) -> None:
        threading.Event().wait(_CANCELLED_AFTER * 2)  # in the claim's worker thread
        claim_new(backend, session_id)

    monkeypatch.setattr(PostgresBackend, "claim_new", slow_claim_new)
    dsn, schema = postgres_schema
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            returned = False
            with trio.move_on_after(_CANCELLED_AFTER):
                await store.claim_new("new")
                returned = True
            assert returned
            assert backend_of(store)._claims.holds("new")
            assert "new" in store._claimed_new
            await store.release_new("new")
            assert not backend_of(store)._claims.holds("new")


async def test_postgres_a_load_cancelled_past_its_grace_ends_no_claim_it_does_not_wait_on(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled load whose thread is still busy past its grace (decoding a large log, on a
    server that answers) while another claim holds the claims lock: what it waits on is no
    statement of the lock connection, which is kept, and with it every claim of the store."""
    from retinue.stores._loader import Recovered, recover

    def slow_recover(*args: Any, **kwargs: Any) -> Recovered:
        recovered = recover(*args, **kwargs)
        threading.Event().wait(_DECODING)  # a large log's decode: no statement at all
        return recovered

    monkeypatch.setattr("retinue.stores._storeloads.recover", slow_recover)
    dsn, schema = postgres_schema
    await store_session(dsn, schema, "big")
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            live = await _live_session(store)
            claims = backend_of(store)._claims
            locker = claims._locker
            assert locker is not None

            def another_claim_at_the_grace_end() -> None:
                threading.Event().wait(_CANCELLED_AFTER + 1.0)
                with claims._locker_lock:
                    threading.Event().wait(1.0)

            other = threading.Thread(target=another_claim_at_the_grace_end)
            other.start()
            with trio.move_on_after(_CANCELLED_AFTER):
                await store.load("big")
            await trio.to_thread.run_sync(other.join)
            assert claims._locker is locker
            locker.execute("SELECT 1")  # not shut down
            assert claims.holds("live")
            run_turn(live)
            await store.flush(live)
