"""What a close waiting for a cancelled one reports as lost (R11.6)."""

from __future__ import annotations

import errno
import threading
from typing import Any

import pytest
import trio
import trio.testing

from retinue.session import Session
from retinue.stores._common import WaitedOutError
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import (
    REAL_DEADLINE,
    attach_undrained,
    close_into,
    enter_noting_refusal,
    load_quietly,
    released_create,
    run_turn,
)
from tests.stores.conftest import StoreKit


async def _load_held_after_its_read(
    kit: StoreKit, store: BufferedStore, monkeypatch: pytest.MonkeyPatch, nursery: trio.Nursery
) -> tuple[Session, threading.Event]:
    """Start, in *nursery*, a load of a new session released before its create was written
    whose id another writer has stored since, held once it has read the stored id; the
    released session and the event that lets the load go on (to drop its buffer)."""
    released = await released_create(store, monkeypatch, "dropped")
    async with kit.open() as other:
        winner = Session.create("dropped")
        other.attach_new(winner)
        run_turn(winner, "stored first")
    backend: Any = store._backend
    real_read = backend.read
    read_back, proceed = threading.Event(), threading.Event()

    def read_then_hold(session_id: str) -> object:
        stored = real_read(session_id)
        read_back.set()
        proceed.wait(REAL_DEADLINE)
        return stored

    monkeypatch.setattr(backend, "read", read_then_hold)
    nursery.start_soon(load_quietly, store, released.id)
    await trio.to_thread.run_sync(read_back.wait, REAL_DEADLINE)
    return released, proceed


async def test_a_close_waiting_for_a_cancelled_one_counts_a_buffer_a_load_dropped(
    transactional_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a new session released before its create was written, whose id another writer has
    stored since, a load of it checking the stored id as a close is cancelled: the load drops its
    buffer, and a close waiting for the cancelled one raises ``CLOSE_FAILED`` naming those events as
    not written, rather than returning as if nothing were lost by counting only the sessions still
    tracked once the load is done."""
    store = transactional_kit.open()
    outcomes: list[str] = []
    with trio.fail_after(REAL_DEADLINE):
        async with store, trio.open_nursery() as nursery:
            released, proceed = await _load_held_after_its_read(
                transactional_kit, store, monkeypatch, nursery
            )
            first, first_ended = trio.CancelScope(), trio.Event()
            for scope, ended in ((first, first_ended), (trio.CancelScope(), trio.Event())):
                nursery.start_soon(close_into, store, scope, outcomes, ended)
                await trio.testing.wait_all_tasks_blocked()  # the first drains, then the next
            first.cancel()
            await first_ended.wait()
            proceed.set()
    assert outcomes[0] == "cancelled"
    assert outcomes[1].startswith("CLOSE_FAILED")
    assert f"{len(released.events)} event(s) of 1 session(s) not written" in outcomes[1]


async def _close_during_failing_open(
    store: BufferedStore, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> tuple[list[str], list[str], list[str]]:
    """An entry whose open fails with *failure* as a close with a session to drain waits for
    it; the opens made, how the entry was refused and how the close ended."""
    backend: Any = store._backend
    real_open = backend.open
    opening, proceed = threading.Event(), threading.Event()
    opens: list[str] = []

    def open_failing_first() -> None:
        opens.append("open")
        if len(opens) == 1:
            opening.set()
            proceed.wait(REAL_DEADLINE)
            raise failure
        real_open()

    monkeypatch.setattr(backend, "open", open_failing_first)
    attach_undrained(store, "undrained")
    refusals: list[str] = []

    closes: list[str] = []
    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(enter_noting_refusal, store, refusals)
            await trio.to_thread.run_sync(opening.wait, REAL_DEADLINE)
            nursery.start_soon(close_into, store, trio.CancelScope(), closes, trio.Event())
            await trio.testing.wait_all_tasks_blocked()  # the close waits for the open
            proceed.set()
    return opens, refusals, closes


async def test_a_close_with_sessions_to_drain_fails_with_the_open_it_waited_for(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close with a session to drain waits for an entry's open under way; when that open
    fails having waited out another connection's lock, the close fails with its error and opens the
    storage no more, rather than opening it again itself to wait out a second full timeout before
    failing the same way."""
    store = blocking_kit.open()
    locked_out = WaitedOutError("opening the store: database is locked", code="STORAGE_ERROR")
    opens, refusals, closes = await _close_during_failing_open(store, monkeypatch, locked_out)
    assert opens == ["open"]
    assert refusals == ["STORAGE_ERROR"]
    [closed] = closes
    assert closed.startswith("STORAGE_ERROR")
    assert "database is locked" in closed


async def test_a_close_with_sessions_to_drain_opens_again_after_a_transient_failure(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close with a session to drain waits for an entry's open under way; when that open
    fails at once (a server restarting refuses the connection), the close opens the storage again
    and drains the session rather than failing with the open's error and losing the session's
    events."""
    store = blocking_kit.open()
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    opens, refusals, closes = await _close_during_failing_open(store, monkeypatch, refused)
    assert opens == ["open", "open"]
    assert refusals == ["STORAGE_ERROR"]
    assert closes == ["ended"]
    assert store.statistics().buffered_events == 0


async def test_a_close_draining_while_a_load_drops_a_released_create_fails_so(
    transactional_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.6: a close that begins while a load of a new session released before its create was
    written finds the id stored by another writer and drops its buffer raises ``CLOSE_FAILED``
    naming that session's refusal (``SESSION_ALREADY_EXISTS``), as a flush of it does, rather than
    returning as if every session were stored because its drain finds nothing left to write."""
    store = transactional_kit.open()
    outcomes: list[str] = []
    with trio.fail_after(REAL_DEADLINE):
        async with store, trio.open_nursery() as nursery:
            _, proceed = await _load_held_after_its_read(
                transactional_kit, store, monkeypatch, nursery
            )
            nursery.start_soon(close_into, store, trio.CancelScope(), outcomes, trio.Event())
            await trio.testing.wait_all_tasks_blocked()  # the drain waits for the load
            proceed.set()
    [closed] = outcomes
    assert closed.startswith("CLOSE_FAILED")
    assert "session 'dropped' already exists" in closed
