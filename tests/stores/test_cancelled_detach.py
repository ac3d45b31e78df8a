"""A detach cancelled while the writer holds its write: what the store keeps once that
write has stored everything (R11.6, R12.7)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores._backend import AppendBatch
from tests.stores._kit import lines, run_turn
from tests.stores.conftest import StoreKit

REAL_DEADLINE = 60.0
"""Real seconds: the write waits in a worker thread, which would race a virtual clock ahead."""


class _HeldWrite:
    """Holds the next write of a backend until :attr:`proceed` is set, saying when it began."""

    def __init__(self, write: object) -> None:
        assert callable(write)
        self._write = write
        self.reached = threading.Event()
        self.proceed = threading.Event()

    def __call__(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        self.reached.set()
        self.proceed.wait(REAL_DEADLINE)
        results: list[StoreError | None] = self._write(batches)
        return results


async def _cancel_once_reached(held: _HeldWrite, scope: trio.CancelScope) -> None:
    await trio.to_thread.run_sync(held.reached.wait, REAL_DEADLINE)
    scope.cancel()


async def test_store_gives_up_the_claim_of_a_cancelled_detach_once_its_write_stored_all(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a detach cancelled once the writer has taken its write leaves the session
    released, kept for a load to take over what it buffered; once that write has stored
    everything nothing is left to take over, and another store (another process) loads
    the session rather than find it locked until this store closes."""
    session = Session.create("held")
    run_turn(session)
    store = blocking_kit.open()
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            await store.flush(session)
            run_turn(session, "written while its detach is cancelled")
            held = _HeldWrite(store._backend.write)
            monkeypatch.setattr(store._backend, "write", held)
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_cancel_once_reached, held, scope)
                    await store.detach(session)
            assert scope.cancelled_caught
            held.proceed.set()
            await store.flush(session)  # answered once the held write's group is done
            assert store.statistics().buffered_events == 0
            async with blocking_kit.open() as other:
                loaded = await other.load("held")
                await other.detach(loaded)
    assert lines(loaded.events[:]) == lines(session.events[:])


class _HeldRelease:
    """Holds a backend's next release until :attr:`proceed` is set, as a far server would."""

    def __init__(self, release: object) -> None:
        assert callable(release)
        self._release = release
        self.reached = threading.Event()
        self.proceed = threading.Event()

    def __call__(self, session_id: str) -> None:
        self.reached.set()
        self.proceed.wait(REAL_DEADLINE)
        self._release(session_id)


async def test_a_load_while_the_claim_is_given_up_waits_and_loads_the_stored_session(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7, R11.6: a load of the id while the store gives up a cancelled detach's claim
    waits for the claim to go, then loads the stored session with all its events; it was
    refused SESSION_TRACKED ("being loaded") though nothing was loading it."""
    session = Session.create("held")
    run_turn(session)
    store = blocking_kit.open()
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            await store.flush(session)
            run_turn(session, "written while its detach is cancelled")
            held = _HeldWrite(store._backend.write)
            monkeypatch.setattr(store._backend, "write", held)
            release = _HeldRelease(store._backend.release)
            monkeypatch.setattr(store._backend, "release", release)
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_cancel_once_reached, held, scope)
                    await store.detach(session)
            assert scope.cancelled_caught
            held.proceed.set()
            await trio.to_thread.run_sync(release.reached.wait, REAL_DEADLINE)
            loaded: list[Session] = []

            async def load() -> None:
                loaded.append(await store.load("held"))

            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(load)
                    await trio.sleep(0.05)
                    assert loaded == []  # waiting on the release
                    release.proceed.set()
            finally:
                release.proceed.set()  # a failed load must not hold the release for good
            await store.detach(loaded[0])
    assert lines(loaded[0].events[:]) == lines(session.events[:])
