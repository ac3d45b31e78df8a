"""Reads that claim nothing end at a cancel, even while storage does not answer.

These run on the real clock: under autojump a worker thread lets virtual time race
ahead to any deadline, the store's own test deadline among them.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import AppendBatch, Listing, StoredLog
from retinue.stores._memory import MemoryBackend
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import run_turn

STALL_SECONDS = 5.0
"""How long, in real time, a stalled read waits before answering: far past its deadline."""
READ_DEADLINE = 0.1
REAL_DEADLINE = 60.0


class _StalledReads:
    """Blocking storage whose reads wait until :attr:`answer` is set, as a server that
    stopped answering an open connection holds a read's worker thread."""

    blocking = True
    durable = True
    writes_can_tear = False

    def __init__(self) -> None:
        self.inner = MemoryBackend()
        self.answer = threading.Event()
        self.answer.set()

    def _stall(self) -> None:
        self.answer.wait(STALL_SECONDS)

    def open(self) -> None:
        self.inner.open()

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        return self.inner.write(batches)

    def read(self, session_id: str) -> StoredLog | None:
        self._stall()
        return self.inner.read(session_id)

    def listing(self) -> Listing:
        self._stall()
        return self.inner.listing()

    def contains(self, session_id: str) -> bool:
        self._stall()
        return self.inner.contains(session_id)

    def claim(self, session_id: str) -> None:
        self.inner.claim(session_id)

    def release(self, session_id: str) -> None:
        self.inner.release(session_id)

    def close(self) -> None:
        self.inner.close()


def _reads(store: BufferedStore) -> dict[str, Callable[[], Awaitable[object]]]:
    """The reads of *store* that claim nothing, by name, each of the stalled session."""
    return {
        "list": store.list,
        "listing": store.listing,
        "exists": lambda: store.exists("stalled"),
        "inspect": lambda: store.inspect("stalled"),
        "inspect_recovered": lambda: store.inspect_recovered("stalled"),
    }


@pytest.mark.parametrize("read", ["exists", "inspect", "inspect_recovered", "list", "listing"])
async def test_a_deadline_ends_a_read_whose_storage_stopped_answering(read: str) -> None:
    """A trio deadline around ``list``, ``exists`` or ``inspect`` ends it as it expires,
    though its worker thread still waits on the storage (say, a PostgreSQL server that
    stopped answering a pooled connection); the store keeps working once it answers."""
    backend = _StalledReads()
    store = BufferedStore(backend, name="StalledStore")
    session = Session.create("stalled")
    run_turn(session)
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            await store.flush(session)
            backend.answer.clear()
            with trio.move_on_after(READ_DEADLINE) as deadline:
                await _reads(store)[read]()
            backend.answer.set()
            assert deadline.cancelled_caught
            assert await store.exists("stalled")
            await store.detach(session)


async def test_abandoned_reads_leave_the_shared_worker_threads_to_others() -> None:
    """Reads a deadline abandoned keep their worker threads until the storage answers:
    they run on the store's own few threads, so a health check retried against silent
    storage leaves trio's shared threads to flushes and sync tool bodies. On the shared
    limiter (40 threads), 41 abandoned reads left no thread for anything else."""
    backend = _StalledReads()
    store = BufferedStore(backend, name="StalledStore")
    session = Session.create("stalled")
    run_turn(session)
    shared = trio.to_thread.current_default_thread_limiter().total_tokens
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            backend.answer.clear()
            try:
                for _ in range(int(shared) + 1):
                    with trio.move_on_after(0.01):
                        await store.exists("stalled")
                with trio.fail_after(2):
                    await trio.to_thread.run_sync(lambda: None)
                    run_turn(session)
                    await store.flush(session)
            finally:
                backend.answer.set()
            await store.detach(session)
