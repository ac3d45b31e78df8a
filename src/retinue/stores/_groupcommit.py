"""Group commit: flush requests written to a backend together, one transaction per group."""

from __future__ import annotations

import contextlib
import math
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TypeVar

import trio

from retinue._errors import InvalidJsonError, RetinueError, StoreError

from ._backend import AppendBatch, StorageBackend
from ._common import storage_failed
from ._records import Entry, Request, Tracked, failed

__all__ = ["GroupCommitter", "call_backend", "call_ended_on_cancel"]

T = TypeVar("T")

CLAIM_GRACE_SECONDS = 1.5
"""How long the worker thread of a cancelled claim is given to end on its own (it looks for the
cancel between statements) before what it waits on is ended: a server that answers does so
sooner, and one that stopped answering would hold it, and the cancel, for good."""


async def call_backend(
    backend: StorageBackend,
    fn: Callable[..., T],
    what: str,
    *args: object,
    threads: trio.CapacityLimiter,
    abandon_on: trio.CapacityLimiter | None = None,
) -> T:
    """Run a backend call in a worker thread (inline if it never blocks); wrap I/O errors.

    Always a checkpoint. Raises ``StoreError(STORAGE_ERROR)`` naming *what*
    for any failure that is not already a retinue error. The thread is counted
    by *threads*, the store's own: on trio's shared limiter, an application's
    own ``trio.to_thread`` calls could take every thread and hold the store's
    flushes back. Given *abandon_on*, a cancel returns at once and the thread's
    call is left to end on its own (for a read that changes nothing), its thread
    counted by that limiter instead: an abandoned call holds its token until the
    storage answers, which would leave no thread for the store's flushes.
    """
    try:
        if backend.blocking:
            if abandon_on is not None:
                return await trio.to_thread.run_sync(
                    fn, *args, abandon_on_cancel=True, limiter=abandon_on
                )
            return await trio.to_thread.run_sync(fn, *args, limiter=threads)
        await trio.lowlevel.checkpoint()
        return fn(*args)
    except RetinueError:
        raise
    except Exception as exc:
        raise StoreError(f"{what}: {type(exc).__name__}: {exc}", code="STORAGE_ERROR") from exc


async def call_ended_on_cancel(
    backend: StorageBackend,
    fn: Callable[..., T],
    what: str,
    *args: object,
    threads: trio.CapacityLimiter,
    cancelled: bool = False,
) -> T:
    """:func:`call_backend` for a claim, or a load's read under one, which a cancel waits for.

    Once the call is cancelled (given *cancelled*, at once: a release shielded after a cancel),
    its thread is given :data:`CLAIM_GRACE_SECONDS` to end, then the backend's
    ``end_statements_of(thread)`` ends what it waits on, again after each as long until it
    returns; a failure it then raises is the cancel's. A backend without that method (looked up
    on its class, as ``claim_new``) is called as by :func:`call_backend`.
    """
    end = getattr(type(backend), "end_statements_of", None)
    if end is None:
        return await call_backend(backend, fn, what, *args, threads=threads)
    running: int | None = None  # the worker thread while the call runs
    ended = False

    def run(*given: object) -> T:
        nonlocal running
        running = threading.get_ident()
        try:
            return fn(*given)
        finally:
            running = None

    def end_statements() -> None:
        nonlocal ended
        thread = running  # read once: the worker clears it as its call returns
        if thread is not None:
            ended = True
            end(backend, thread)

    finished = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            partial(_end_once_cancelled, end_statements, finished, at_once=cancelled)
        )
        try:
            return await call_backend(backend, run, what, *args, threads=threads)
        except BaseException as exc:  # raised past the nursery, which would group it
            failure = exc
        finally:
            finished.set()
            nursery.cancel_scope.cancel()
    if ended:
        await trio.lowlevel.checkpoint()  # the cancel whose end of a statement failed it
    raise failure


async def _end_once_cancelled(  # noqa: ASYNC910 - waits only once cancelled, shielded: a checkpoint after would raise the cancel in place of the call's outcome
    end_statements: Callable[[], None], finished: trio.Event, *, at_once: bool
) -> None:
    """Once cancelled (or *at_once*), end a call's statements each :data:`CLAIM_GRACE_SECONDS`
    until it has *finished*; its nursery cancels this as the call ends.

    It returns rather than raise the cancel: the call's outcome is its caller's, as that of a
    ``trio.to_thread`` call a cancel waits for, the cancel coming at the caller's next
    checkpoint (a claim the call took is then held, and known, for the caller to release).
    """
    if not at_once:
        # The call's cancel, or its nursery's as the call ends: the outcome decides.
        with contextlib.suppress(trio.Cancelled):
            await trio.sleep_forever()
    with trio.CancelScope(shield=True):
        while not finished.is_set():
            with trio.move_on_after(CLAIM_GRACE_SECONDS):
                await finished.wait()
            if not finished.is_set():
                end_statements()


class GroupCommitter:
    """Writes flush requests for the sessions in *tracked*, keeping the commit counters.

    While :meth:`run_writer` runs, every request submitted meanwhile joins the
    writer's next group (one backend write, one transaction, one fsync).
    Otherwise requests are written directly, one group per submission. A
    backend that never blocks is written synchronously.
    """

    def __init__(
        self,
        backend: StorageBackend,
        name: str,
        tracked: dict[str, Tracked],
        *,
        threads: trio.CapacityLimiter,
        let_go: Callable[[list[Tracked]], Awaitable[None]] | None = None,
    ) -> None:
        self._backend = backend
        self._threads = threads
        # Weak: *let_go* is a bound method of the store that owns this committer, and
        # a strong reference back would leave the store, with every session its
        # backend holds, to the cyclic collector. The store outlives its commits.
        self._let_go = None if let_go is None else weakref.WeakMethod(let_go)
        """Calls back with the released sessions a commit has just stored all the buffer of."""
        self._name = name
        self._tracked = tracked
        self._send, self._receive = trio.open_memory_channel[Request](math.inf)
        self._writer_running = False
        self._closed = False
        # One commit at a time: a direct commit still in its thread when the writer
        # starts must not overlap the writer's commit of the same session.
        self._commit_lock = trio.Lock()
        # Set once the write in flight has ended and its results are recorded.
        self._written: trio.Event | None = None
        self.counters = {
            "flush_requests": 0,
            "commits": 0,
            "committed_events": 0,
            "largest_group": 0,
        }
        self.write_seconds = 0.0

    @property
    def commit_lock(self) -> trio.Lock:
        """Held for each commit until its results are recorded: holding it, no write is under way."""
        return self._commit_lock

    async def written(self) -> None:
        """Wait until the write in flight, if any, has ended and its results are recorded.

        Only the write: a load holding :attr:`commit_lock` meanwhile is not waited for.
        """
        if self._written is None:
            await trio.lowlevel.checkpoint()
        else:
            await self._written.wait()

    def close(self) -> None:
        """Accept no more requests; the writer answers those still queued and stops.

        Requests still queued are refused (``STORE_CLOSED``), not written: the
        store releases its storage next, and a write after that would claim a
        session again for nobody.
        """
        self._closed = True
        self._send.close()

    async def submit(self, requests: Sequence[Request]) -> None:
        """Commit *requests* (not empty): through the writer's next group, or directly."""
        if not self._backend.blocking:
            # Committed before the schedule point, as in flush: no cancel loses it.
            self._write_now(requests)
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        if self._writer_running:
            for request in requests:
                self._send.send_nowait(request)
                request.queued = True
            for request in requests:
                await request.done.wait()
            requests = [request for request in requests if request.returned]
            if not requests:
                return  # noqa: ASYNC910 - requests was not empty: the loop above awaited
            for request in requests:
                request.returned = False
        await self._commit(requests)

    def commit_at_once(self, tracked: Tracked) -> StoreError | None:
        """Commit one session's log since its last commit to a backend that never blocks, synchronously."""
        events = tracked.logged()
        if not events:
            return None  # nothing is left to write
        self.counters["flush_requests"] += 1
        batch = AppendBatch(tracked.session.id, tracked.cursor, events, header=tracked.header)
        [result] = self._write_isolated([batch])
        # A group of one with no request to answer: recorded without an Entry (once a turn).
        if result is None:
            self._count_commit(1)
            self._committed(batch, tracked)
        return result

    def _write_now(self, requests: Sequence[Request]) -> None:
        """Commit synchronously: a backend that never blocks gains nothing from grouping."""
        entries = self._group_entries(requests)
        if entries:
            self._record(entries, self._write_isolated([entry.batch for entry in entries]))

    # -- the writer -----------------------------------------------------------

    async def run_writer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Commit queued requests in groups until :meth:`close`; answers every request."""
        self._writer_running = True
        task_status.started()
        try:
            async for request in self._receive:
                group = [request]
                while True:
                    try:
                        group.append(self._receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                # A group taken is written whole: cancelled halfway it would fail
                # requests whose submitters (a teardown's final flush) still wait.
                with trio.CancelScope(shield=True):
                    await self._commit(group)
        finally:
            self._writer_running = False
            self._answer_stranded()

    def _answer_stranded(self) -> None:
        """Answer the requests the writer leaves queued as it stops.

        Once the store is closed they are refused. A writer cancelled with the
        scope around the store (Ctrl-C) hands them back instead: their
        submitters, a shielded teardown's final flushes among them, write
        them directly, as they would had no writer run.
        """
        while True:
            try:
                request = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return
            if self._closed:
                self._refuse(request)
            else:
                request.queued = False
                request.returned = True
                request.done.set()

    def _refuse(self, request: Request) -> None:
        request.error = StoreError(
            f"session {request.session_id!r}: {self._name} stopped before the write",
            code="STORE_CLOSED",
        )
        request.done.set()

    async def _commit(self, group: Sequence[Request]) -> None:
        """Write one group in one backend call, after any commit in flight; every request is answered."""
        drained: list[Tracked] = []
        try:
            async with self._commit_lock:
                if self._closed:
                    for request in group:
                        self._refuse(request)
                    return
                entries = self._group_entries(group)
                if entries:
                    await self._write_entries(entries)
                    drained = _released_and_drained(entries)
        except BaseException as exc:
            for request in group:
                if not request.answered:
                    request.error = StoreError(
                        f"session {request.session_id!r}: the write was interrupted ({exc!r})",
                        code="WRITE_FAILED",
                    )
            raise
        finally:
            for request in group:
                request.done.set()
        if drained and self._let_go is not None:
            let_go = self._let_go()
            if let_go is not None:
                await let_go(drained)

    def _group_entries(self, group: Sequence[Request]) -> list[Entry]:
        """One entry per session; flushes of one tracked session share it, nothing else does.

        Each entry counts as one flush request: flushes that join it write nothing more,
        so a session flushed by several tasks at once counts once, with a writer or without.
        """
        entries: dict[str, Entry] = {}
        for request in group:
            entry = entries.get(request.session_id)
            if entry is not None:
                self._join(entry, request)
                continue
            if request.prebuilt is not None:
                entries[request.session_id] = Entry(request.prebuilt, None, [request])
            else:
                tracked = self._tracked.get(request.session_id)
                events = () if tracked is None else tracked.pending()
                if tracked is None or not events:
                    continue  # written by an earlier commit: this flush has nothing to write
                batch = AppendBatch(
                    request.session_id, tracked.cursor, events, header=tracked.header
                )
                entries[request.session_id] = Entry(batch, tracked, [request])
            self.counters["flush_requests"] += 1
        return list(entries.values())

    def _join(self, entry: Entry, request: Request) -> None:
        """Answer *request* with *entry*'s result, or refuse it if it would write other events.

        A load's repair and a flush of a session attached under the same id
        write different logs: answering one with the other's result would
        acknowledge events that were never written.
        """
        if request.prebuilt is None and entry.tracked is not None:
            entry.requests.append(request)
            return
        request.error = StoreError(
            f"session {request.session_id!r}: another write of the same id is in this group "
            "(a load's repair and a flush of an attached session)",
            code="SESSION_TRACKED",
        )
        request.answered = True

    async def _write_entries(self, entries: list[Entry]) -> None:  # noqa: ASYNC910 - call_backend checkpoints before the backend can fail
        batches = [entry.batch for entry in entries]
        written = self._written = trio.Event()
        try:
            try:
                results = await call_backend(
                    self._backend,
                    self._write_isolated,
                    "a group commit",
                    batches,
                    threads=self._threads,
                )
            except Exception as exc:
                results = failed(batches, _group_error(exc))
            self._record(entries, results)
        finally:
            self._written = None
            written.set()

    def _write_isolated(self, batches: list[AppendBatch]) -> list[StoreError | None]:
        """Write *batches* in one backend call; if it raises, split them only if that may help.

        Nothing of a group that raised was committed. One batch may be its cause
        (an event that cannot be encoded): written one at a time, only that
        session's flush fails and the writer lives on (R11.5). A failure of the
        storage itself (busy, full, disconnected) fails the whole group at once:
        each session alone would fail the same way, each after its own wait.
        """
        try:
            return self._timed_write(batches)
        except Exception as exc:
            if len(batches) == 1 or storage_failed(exc):
                return _refusals(batches, exc)
        return self._write_each(batches)

    def _write_each(self, batches: list[AppendBatch]) -> list[StoreError | None]:
        """Write each batch alone, until the storage itself fails: then the rest fail with it."""
        results: list[StoreError | None] = []
        for index, batch in enumerate(batches):
            try:
                results.extend(self._timed_write([batch]))
            except Exception as exc:
                if storage_failed(exc):
                    return results + failed(batches[index:], _group_error(exc))
                results.extend(_refusals([batch], exc))
        return results

    def _timed_write(self, batches: list[AppendBatch]) -> list[StoreError | None]:
        start = time.perf_counter()
        try:
            return self._backend.write(batches)
        finally:
            self.write_seconds += time.perf_counter() - start

    def _record(self, entries: list[Entry], results: Sequence[StoreError | None]) -> None:
        committed = sum(result is None for result in results)
        if committed:
            # A group counts as a commit when something of it was committed, and its size
            # as the sessions it committed: a refused batch stored nothing.
            self._count_commit(committed)
        for entry, result in zip(entries, results, strict=True):
            if result is None:
                self._committed(entry.batch, entry.tracked)
            for request in entry.requests:
                request.error = result
                request.answered = True

    def _count_commit(self, size: int) -> None:
        counters = self.counters
        counters["commits"] += 1
        counters["largest_group"] = max(counters["largest_group"], size)

    def _committed(self, batch: AppendBatch, tracked: Tracked | None) -> None:
        count = len(batch.events)
        self.counters["committed_events"] += count
        if tracked is None or self._tracked.get(batch.session_id) is not tracked or not count:
            return
        # Trim only what lies past the cursor: another commit may have stored part of the batch.
        end = batch.events[-1].seq + 1
        if end <= tracked.cursor:
            return
        tracked.stored_to(end)
        tracked.header = None


def _released_and_drained(entries: Sequence[Entry]) -> list[Tracked]:
    """The sessions of *entries* a failed or cancelled detach released whose buffer is now stored."""
    return [
        entry.tracked
        for entry in entries
        if entry.tracked is not None and entry.tracked.released and not entry.tracked.unstored()
    ]


def _refusals(batches: list[AppendBatch], exc: Exception) -> list[StoreError | None]:
    """The answers to *batches*, of which a write that raised *exc* committed nothing."""
    if isinstance(exc, InvalidJsonError):
        # An event no load would read back (R11.4), not the storage: refused as the value it holds.
        return [
            StoreError(f"session {batch.session_id!r}: {exc.message}", code=exc.code)
            for batch in batches
        ]
    return failed(batches, _group_error(exc))


def _group_error(exc: Exception) -> StoreError:
    """*exc* as the StoreError a failed write answers its flushes with."""
    if isinstance(exc, StoreError):
        return exc
    return StoreError(
        f"the store's write failed: {type(exc).__name__}: {exc}", code="STORAGE_ERROR"
    )
