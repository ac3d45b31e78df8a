"""A store's lifetime: its storage opened and closed, the group-commit writer's nursery."""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import NoReturn, Self, TypeVar

import trio

from retinue._errors import StoreError
from retinue.session import Session

from ._backend import StorageBackend
from ._common import WaitedOutError, already_exists
from ._groupcommit import GroupCommitter, call_backend
from ._records import FirstClose, LetGo, Loaded, Request, StoreStatistics, Tracked

__all__ = ["StoreLifetime"]

log = logging.getLogger("retinue.stores")

# Worker threads a store's cancellable reads (list, listing, exists, inspect) run in at once.
READ_THREADS = 4
# Worker threads a store's other calls (opens, writes, loads, closes) run in at once: as many
# as trio's shared limiter gives, but the store's own.
STORE_THREADS = 40

T = TypeVar("T")


class StoreLifetime:
    """The state of a :class:`~retinue.stores.BufferedStore` and its lifetime.

    Entering opens the storage and starts the group-commit writer; the last
    exit (or :meth:`aclose`) drains every buffer and releases the storage.
    Flush requests go through :meth:`_submit`, to the writer or directly.
    """

    def __init__(self, backend: StorageBackend, *, name: str) -> None:
        if not backend.durable and backend.blocking:
            # The loop flushes a store that is not durable without a shield or deadline.
            raise TypeError(f"{name}: a backend that is not durable must not be blocking")
        self._backend = backend
        self._name = name
        self._tracked: dict[str, Tracked] = {}
        # The store's own threads: an application's trio.to_thread calls cannot take them.
        self._threads = trio.CapacityLimiter(STORE_THREADS)
        self._committer = GroupCommitter(
            backend, name, self._tracked, threads=self._threads, let_go=self._let_go_stored
        )
        # The threads of the reads a cancel may abandon: their own, few, so reads that
        # storage never answers cannot take the threads every flush and tool body share.
        self._reads = trio.CapacityLimiter(READ_THREADS)
        self._open_lock = trio.Lock()
        self._opening: trio.CancelScope | None = None
        """Around an open in its worker thread: a close cancels it, so the open ends with it."""
        self._open_waited_out: WaitedOutError | None = None
        """The last open's failure if it waited out another connection's lock or a silent
        server: a close that waited for it to drain fails so too, where it opens again
        after any other failure."""
        self._enter_lock = trio.Lock()
        self._opened = False
        self._closed = False
        self._first_close: FirstClose | None = None
        """Set as the first :meth:`aclose` begins: a close called after it waits for it."""
        self._loading: set[str] = set()
        """Ids being loaded or deleted: a second load or an attach of one meanwhile is refused."""
        self._deleting: set[str] = set()
        """The ids of :attr:`_loading` a delete reserved, so a refusal names what holds them."""
        self._claimed_new: set[str] = set()
        """Ids claimed by ``claim_new`` that no session is attached under yet."""
        self._releasing: dict[str, trio.Event] = {}
        """Ids whose claim a released session is giving up: a load of one waits for it."""
        self._loaded: dict[str, Loaded] = {}
        """Sessions loaded and not attached yet, each with how many of its events are stored."""
        self._let_go: weakref.WeakKeyDictionary[Session, LetGo] = weakref.WeakKeyDictionary()
        """Sessions a failed or cancelled detach released, and what they left."""
        self._stack: contextlib.AsyncExitStack | None = None
        """The writer's nursery, open in the task that entered the store first."""
        self._writer_scope: trio.CancelScope | None = None
        self._owner: trio.lowlevel.Task | None = None
        self._owner_depth = 0
        """Entries of the owner task not exited yet: its first is the last of them to exit."""
        self._depth = 0

    @property
    def _closing(self) -> bool:
        """Whether :meth:`aclose` has begun: what it drains is what is attached then, so no
        session may be attached from there on."""
        return self._first_close is not None

    @property
    def durable(self) -> bool:
        """Whether stored sessions outlive this process (false only for the memory backend)."""
        return self._backend.durable

    # -- lifetime -------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Open the storage and start the group-commit writer task.

        If cancelled or failing part-way (say, a deadline that fires while the
        storage opens in its worker thread), the writer's nursery is closed
        again and storage opened here is released, so the store can be
        entered again later. Entering a store that is already entered (say,
        ``open_runtime(store=store)`` inside ``async with store:``) shares the
        running writer; only the last exit drains and closes the store. The
        writer lives in the task that entered first: if that task exits while
        another (a second runtime's) is still inside, the writer stops there and
        flushes commit on their own from then on. A store closed, or closing, is
        entered no more (``StoreError(STORE_CLOSED)``), whoever is still inside;
        an entry still opening the storage as a close with nothing to drain begins
        is refused so then, its open ended (one waiting for another connection's
        lock too). A close with sessions to drain drains them through that open; if
        it fails having waited out another connection's lock or a server that never
        answered, the close fails with its error, and if it fails otherwise (a server
        restarting), the close opens again.
        """
        # Entries wait for one another: two tasks entering at once would each start a writer.
        async with self._enter_lock:
            if self._closed or self._closing:
                # Let in, it would find every attach refused: the store is closed, or will be
                # once its drain ends, however many tasks are still inside it.
                state = "closed" if self._closed else "closing"
                raise StoreError(f"{self._name} is {state}", code="STORE_CLOSED")
            if self._depth:
                self._depth += 1
                self._owner_depth += self._owner is trio.lowlevel.current_task()
            else:
                await self._enter_first()
        return self

    async def _enter_first(self) -> None:
        """Open the storage and start the writer in this task's nursery; unwind on failure."""
        was_open = self._opened
        stack = contextlib.AsyncExitStack()
        nursery: trio.Nursery | None = None
        try:
            await self._ensure_open()
            nursery = await stack.enter_async_context(trio.open_nursery())
            await nursery.start(self._committer.run_writer)
            if self._closing:
                # A close began while this entry opened the storage: it drains and closes it.
                raise StoreError(f"{self._name} is closing", code="STORE_CLOSED")
        except BaseException:
            # Nobody calls __aexit__ after a failed __aenter__: unwind here, or the
            # nursery stays on this task's stack (trio: "Nursery stack corrupted").
            if nursery is not None:
                nursery.cancel_scope.cancel()
            try:
                await stack.aclose()  # outside any new scope: it must exit in order
            finally:
                # Storage a close under way drains is that close's to release.
                if not was_open and not self._closing:
                    with trio.CancelScope(shield=True):
                        await self._release_storage()
            raise
        self._stack = stack
        self._writer_scope = nursery.cancel_scope
        self._owner = trio.lowlevel.current_task()
        self._depth = self._owner_depth = 1

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Drain every buffer, stop the writer and close the storage.

        If the body raised, a failure to drain is logged rather than raised, so
        it does not hide the body's exception. An exit other than the last
        closes nothing (but the writer, if its task entered first).
        """
        if self._depth > 1:
            self._depth -= 1
            await self._leave_writer()
            return
        self._depth = 0
        try:
            await self.aclose()
        except StoreError:
            if exc_value is None:
                raise
            log.exception("%s: draining on exit failed while an error was propagating", self._name)
        finally:
            stack, self._stack = self._stack, None
            if stack is not None:
                await stack.aclose()
            else:
                await trio.lowlevel.checkpoint()

    async def _leave_writer(self) -> None:
        """Stop the writer if this task runs it: its nursery cannot outlive the block that opened it.

        Requests it still holds are handed back to their submitters, who commit them directly.
        """
        stack = self._stack
        if stack is None or self._owner is not trio.lowlevel.current_task():
            await trio.lowlevel.checkpoint()
            return
        self._owner_depth -= 1
        if self._owner_depth:
            await trio.lowlevel.checkpoint()  # an inner entry of the owner: its nursery stays
            return
        self._stack = None
        assert self._writer_scope is not None
        self._writer_scope.cancel()
        await stack.aclose()

    async def aclose(self) -> None:
        """Drain every buffer (one group), then release storage; failures are aggregated.

        Waits for the final commit; always a checkpoint. If cancelled, the
        drain is cut short (events not yet committed are not written; flush
        sessions first, as agent teardown does), but the store is still closed
        and its storage released (connections, file locks). An attach while it
        drains is refused (``STORE_CLOSED``). A close called while another
        drains or releases the storage waits for that one to end: it raises
        ``StoreError(CLOSE_FAILED)`` if that one failed, or was cancelled with
        events left unwritten, and returns otherwise. Once a close has ended,
        another returns at once, even after one a cancel cut short: that loss is
        the cancelled caller's to know of (see above).
        """
        first = self._first_close
        if first is not None:
            await self._wait_for_close(first)
            return
        self._first_close = first = FirstClose()
        try:
            await self._drain_and_close(first)
        except Exception as exc:
            first.failure = exc
            raise
        except BaseException:
            # Cancelled or interrupted: what the cut drain left unwritten is lost unless
            # a close waiting for this one reports it.
            first.cut = True
            raise
        finally:
            first.done.set()

    async def _wait_for_close(self, first: FirstClose) -> None:
        """Wait for the close under way to end; raise ``CLOSE_FAILED`` if it did not complete.

        Its own drain would queue behind the running one and find the store closed:
        every session that one stores would be reported as not drained. Waited for even
        once the store is marked closed: its storage (file locks, claims) is released
        after that, and a caller reopening it must find it released. What a cancelled
        one left unwritten is counted once a load checking a released session is done.
        A close that has ended was reported to its own caller: a later one returns at once.
        """
        if first.done.is_set():
            await trio.lowlevel.checkpoint()
            return
        await first.done.wait()
        failure = first.failure
        if failure is None and first.cut:
            failure = await self._left_unwritten(first.draining)
        if failure is not None:
            raise StoreError(
                f"{self._name}: the close this one waited for did not complete: {failure}",
                code="CLOSE_FAILED",
            ) from failure

    async def _left_unwritten(self, drained: Sequence[Tracked]) -> StoreError | None:
        """What a cancelled close left unwritten, as the error a close waiting for it raises.

        Counted over *drained*, what that close set out to drain, under the commit lock: a load holds
        it while it checks whether a released session's create is stored (its reply lost),
        and what it finds stored is not lost; a buffer it drops (another writer stored the
        id) is, though the store tracks that session no more.
        """
        async with self._committer.commit_lock:
            left = [item.unstored() for item in drained if item.unstored()]
        if not left:
            return None
        return StoreError(
            f"it was cancelled with {sum(left)} event(s) of {len(left)} session(s) not written",
            code="CLOSE_FAILED",
        )

    async def _drain_and_close(self, first: FirstClose) -> None:
        """Drain every buffer as one group, then release storage; failures are aggregated."""
        self._open_waited_out = None  # one that failed before this close began is tried again
        tracked = first.draining = list(self._tracked.values())
        if self._opening is not None and not any(item.buffer for item in tracked):
            # Nothing to drain: the storage would be opened only to be closed again.
            self._opening.cancel()
        try:
            results = await self._flush_many(tracked)
        except BaseException:
            self._stop_tracking(tracked)
            with trio.CancelScope(shield=True):
                await self._release_storage()
                # A commit in flight has ended with the release: only once the writer has
                # recorded its results does what is left unwritten (which a close waiting
                # for this one reports) say what was lost.
                await self._committer.written()
            raise
        self._stop_tracking(tracked)
        if self._opened:
            self._opened = False
            # Shielded: a store marked closed must not keep its locks or connections.
            with trio.CancelScope(shield=True):
                await self._call(self._backend.close, "closing the store")
        outcomes = [
            error or self._dropped(item) for item, error in zip(tracked, results, strict=True)
        ]
        errors = [error for error in outcomes if error is not None]
        if errors:
            summary = "; ".join(error.message for error in errors)
            raise StoreError(
                f"{len(errors)} session(s) could not be drained on close: {summary}",
                code="CLOSE_FAILED",
            ) from errors[0]

    def _dropped(self, item: Tracked) -> StoreError | None:
        """Why *item*, whose drain found nothing to write, still holds events unwritten.

        A load dropped its buffer meanwhile: its create can never be written, another
        writer having stored the id (a flush of it fails so too)."""
        if self._tracked.get(item.session.id) is item or not item.unstored():
            return None
        return already_exists(item.session.id)

    async def _let_go_stored(self, drained: list[Tracked]) -> None:
        """Let go of released sessions whose buffer a commit has just stored, and of their claims.

        A detach that failed or was cancelled once its write was queued leaves its
        session released, kept with its buffer for a load to take over; once that
        write has stored all of it, nothing is left to take over, and the claim
        would keep every other writer (another process) out of the session until
        this store closes. A load of the id meanwhile waits until the claim is
        given up, then loads the stored session anew: it must not take over a
        session whose claim is going. Shielded: the write it
        follows is answered already, and a claim kept by a cancel would stay kept.
        """
        with trio.CancelScope(shield=True):
            for tracked in drained:
                if self._only_released(tracked):
                    await self._give_up_claim(tracked)
            await trio.lowlevel.checkpoint()

    async def _give_up_claim(self, tracked: Tracked) -> None:
        """Release the claim of *tracked*, released and stored, then stop tracking it."""
        session_id = tracked.session.id
        given_up = self._releasing[session_id] = trio.Event()
        try:
            await self._call(self._backend.release, f"session {session_id!r}", session_id)
        except StoreError:
            log.exception("%s: releasing a detached session's claim failed", self._name)
            return  # noqa: ASYNC910 - _call checkpoints before the backend can fail
        else:
            if self._tracked.get(session_id) is tracked:
                del self._tracked[session_id]
        finally:
            # A detach of it running alongside may have queued its own release after this one.
            if self._releasing.get(session_id) is given_up:
                del self._releasing[session_id]
            given_up.set()

    def _only_released(self, tracked: Tracked) -> bool:
        """Whether *tracked* is a released session holding nothing that a load took or will take."""
        session_id = tracked.session.id
        loaded = self._loaded.get(session_id)
        return (
            tracked.released
            and not tracked.unstored()
            and self._tracked.get(session_id) is tracked
            and session_id not in self._loading
            and session_id not in self._releasing
            and (loaded is None or loaded.session() is None)
        )

    def _stop_tracking(self, tracked: Sequence[Tracked]) -> None:
        """Mark the store closed: no more attachments, appends or flush requests."""
        self._closed = True
        for item in tracked:
            item.unsubscribe()
        self._committer.close()

    async def _release_storage(self) -> None:  # noqa: ASYNC910 - _call checkpoints before the backend can fail
        """Close the backend while an exception propagates; a failure to close is only logged."""
        if not self._opened:
            await trio.lowlevel.checkpoint()
            return
        self._opened = False
        try:
            await self._call(self._backend.close, "closing the store")
        except StoreError:
            log.exception("%s: closing the storage failed while unwinding", self._name)

    async def _ensure_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._name} is closed", code="STORE_CLOSED")
        if self._opened:
            return  # noqa: ASYNC910 - already open: taken on every flush, whose caller checkpoints next
        async with self._open_lock:
            if self._closed:
                raise StoreError(f"{self._name} is closed", code="STORE_CLOSED")
            if not self._opened:
                self._refuse_after_failed_open()
                await self._open_until_closed()
                if self._closed:
                    await self._close_opened_late()
                self._opened = True

    def _refuse_after_failed_open(self) -> None:
        """Raise the failure of an open that a close under way waited for to drain through,
        if it waited out another connection's lock or a server that never answered.

        Opening again would wait out the same timeout a second time, to fail alike."""
        failure = self._open_waited_out
        if self._closing and failure is not None:
            raise StoreError(failure.message, code=failure.code) from failure

    async def _open_until_closed(self) -> None:
        """Open the storage; a close with nothing to drain ends the open as a cancel would."""
        scope = self._opening = trio.CancelScope()
        self._open_waited_out = None
        try:
            with scope:
                await self._call(self._backend.open, f"opening {self._name}")
        except WaitedOutError as exc:
            self._open_waited_out = exc
            raise
        finally:
            self._opening = None
        if scope.cancelled_caught:
            raise StoreError(f"{self._name} is closed", code="STORE_CLOSED")

    async def _close_opened_late(self) -> NoReturn:
        """Close the storage an open finished after the store was closed; refuse the caller.

        The close found nothing open to close, and a closed store is never closed again:
        kept, its connections and file handles would stay open until the process exits.
        """
        with trio.CancelScope(shield=True):
            try:
                await self._call(self._backend.close, "closing the store")
            except StoreError:
                log.exception("%s: closing storage opened as the store closed failed", self._name)
        raise StoreError(f"{self._name} is closed", code="STORE_CLOSED")

    async def _flush_many(self, tracked: Sequence[Tracked]) -> list[StoreError | None]:
        requests = [Request(item.session.id) for item in tracked]
        await self._submit(
            [request for item, request in zip(tracked, requests, strict=True) if item.buffer]
        )
        return [request.error for request in requests]

    async def _submit(self, requests: Sequence[Request]) -> None:
        """Commit *requests*: through the writer's next group, or directly."""
        if not requests:
            await trio.lowlevel.checkpoint()
            return
        await self._ensure_open()
        await self._committer.submit(requests)

    def statistics(self) -> StoreStatistics:
        """Return a snapshot of buffers and commit counters; never blocks."""
        return StoreStatistics(
            # A closed store has let go of every session, those a close failed to drain too.
            tracked_sessions=0
            if self._closed
            else sum(not item.released for item in self._tracked.values()),
            buffered_events=sum(item.unstored() for item in self._tracked.values()),
            write_seconds=self._committer.write_seconds,
            **self._committer.counters,
        )

    # -- plumbing -------------------------------------------------------------

    def _call(self, fn: Callable[..., T], what: str, *args: object) -> Awaitable[T]:
        return call_backend(self._backend, fn, what, *args, threads=self._threads)

    def _read_call(self, fn: Callable[..., T], what: str, *args: object) -> Awaitable[T]:
        """:meth:`_call` for a read that claims and changes nothing, which a cancel abandons.

        Its worker thread may wait on a server that stopped answering for as long as
        the connection lives; a deadline around the read must still end it. Each
        backend's reads finish on their own beside a close (a connection then closed).
        """
        return call_backend(
            self._backend, fn, what, *args, threads=self._threads, abandon_on=self._reads
        )

    def __repr__(self) -> str:
        stats = self.statistics()
        state = "closed" if self._closed else "open" if self._opened else "unopened"
        return (
            f"<{self._name} {state} tracked={stats.tracked_sessions} "
            f"buffered={stats.buffered_events} commits={stats.commits}>"
        )
