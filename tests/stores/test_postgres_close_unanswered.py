"""PostgresStore's close returns though the server stops answering a lock connection the store
is remaking: the statements that set it up are ended, not waited for."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import trio

from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import run_turn
from tests.stores._postgres_locks_kit import backend_of, drop_lock_connection
from tests.stores._postgres_silent_kit import Forwarder

pytestmark = pytest.mark.postgres

_CLOSE_SECONDS = 10.0


async def test_postgres_close_ends_a_remade_lock_connection_the_server_does_not_answer(
    postgres_schema: tuple[str, str],
) -> None:
    """The server drops the lock connection of a store holding a claim; the one its watcher
    makes in its place is answered no more once connected. The store's close returns within
    seconds, its watcher ended, rather than wait for the server."""
    dsn, schema = postgres_schema
    forwarder = Forwarder(dsn)
    try:
        async with PostgresStore(forwarder.dsn, schema=schema) as store:
            session = Session.create("live")
            store.attach_new(session)
            run_turn(session)
            await store.flush(session)
            claims = backend_of(store)._claims
            connect = claims._connect

            def connect_then_mute(**params: Any) -> Any:
                conn = connect(**params)
                forwarder.muted.set()
                return conn

            claims._connect = connect_then_mute
            drop_lock_connection(dsn, store)
            assert await trio.to_thread.run_sync(forwarder.muted.wait, _CLOSE_SECONDS)
            await trio.sleep(0.5)  # the watcher sends its first statement, unanswered
            started = time.monotonic()
            try:
                with trio.fail_after(_CLOSE_SECONDS):
                    await trio.to_thread.run_sync(backend_of(store).close, abandon_on_cancel=True)
            finally:
                forwarder.close()  # else a close still waiting would hold up the store's exit
            assert time.monotonic() - started < _CLOSE_SECONDS
            assert not any(t.name == "retinue-postgres-claims" for t in threading.enumerate())
    finally:
        forwarder.close()
