"""Write-behind buffering with group commit over a storage backend (R11.3-R11.7)."""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from types import TracebackType
from typing import Self, TypeVar

import trio

from retinue._errors import StoreError
from retinue.session import Event, Session, SessionHeader

from ._backend import AppendBatch, Listing, StorageBackend, StoredLog
from ._groupcommit import GroupCommitter, call_backend
from ._ids import check_session_id
from ._loader import Recovered, recover
from ._records import Loaded, Request, StoreStatistics, Tracked

__all__ = ["BufferedStore"]

log = logging.getLogger("retinue.stores")

T = TypeVar("T")


class BufferedStore:
    """A session store: per-session write-behind buffers over a :class:`StorageBackend`.

    Appends are buffered by a synchronous observer (R4.9, R11.6). ``flush`` is
    the durability checkpoint: inside ``async with store:`` one writer task
    commits every flush pending at that moment as one group (one transaction,
    one fsync), so many agents flushing together cost a few commits. Used
    without ``async with``, each flush commits on its own. Every blocking call
    runs in a worker thread. A failed write keeps the buffer for the next
    flush and never poisons later operations (R11.5).
    """

    def __init__(self, backend: StorageBackend, *, name: str) -> None:
        if not backend.durable and backend.blocking:
            # The loop flushes a store that is not durable without a shield or deadline.
            raise TypeError(f"{name}: a backend that is not durable must not be blocking")
        self._backend = backend
        self._name = name
        self._tracked: dict[str, Tracked] = {}
        self._committer = GroupCommitter(backend, name, self._tracked)
        self._open_lock = trio.Lock()
        self._enter_lock = trio.Lock()
        self._opened = False
        self._closed = False
        self._loading: set[str] = set()
        """Ids being loaded: a second load or an attach of one meanwhile is refused."""
        self._loaded: dict[str, Loaded] = {}
        """Sessions loaded and not attached yet, each with how many of its events are stored."""
        self._stack: contextlib.AsyncExitStack | None = None
        """The writer's nursery, open in the task that entered the store first."""
        self._writer_scope: trio.CancelScope | None = None
        self._owner: trio.lowlevel.Task | None = None
        self._owner_depth = 0
        """Entries of the owner task not exited yet: its first is the last of them to exit."""
        self._depth = 0

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
        flushes commit on their own from then on.
        """
        # Entries wait for one another: two tasks entering at once would each start a writer.
        async with self._enter_lock:
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
        except BaseException:
            # Nobody calls __aexit__ after a failed __aenter__: unwind here, or the
            # nursery stays on this task's stack (trio: "Nursery stack corrupted").
            if nursery is not None:
                nursery.cancel_scope.cancel()
            try:
                await stack.aclose()  # outside any new scope: it must exit in order
            finally:
                if not was_open:
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

        Waits for the final commit; always a checkpoint. Idempotent. If
        cancelled, the drain is cut short (events not yet committed are not
        written; flush sessions first, as agent teardown does), but the store
        is still closed and its storage released (connections, file locks).
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        tracked = list(self._tracked.values())
        try:
            results = await self._flush_many(tracked)
        except BaseException:
            self._stop_tracking(tracked)
            with trio.CancelScope(shield=True):
                await self._release_storage()
            raise
        self._stop_tracking(tracked)
        if self._opened:
            self._opened = False
            # Shielded: a store marked closed must not keep its locks or connections.
            with trio.CancelScope(shield=True):
                await self._call(self._backend.close, "closing the store")
        errors = [error for error in results if error is not None]
        if errors:
            summary = "; ".join(error.message for error in errors)
            raise StoreError(
                f"{len(errors)} session(s) could not be drained on close: {summary}",
                code="CLOSE_FAILED",
            ) from errors[0]

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
            if not self._opened:
                await self._call(self._backend.open, "opening the store")
                self._opened = True

    # -- tracking -------------------------------------------------------------

    def attach(self, session: Session) -> None:
        """Start buffering *session*'s appends; events already in it count as stored.

        Of a session this store loaded, only the events it loaded count as
        stored: those appended since (by an agent's setup, before it is
        published) are written by the next flush. Synchronous and never
        blocks. Raises ``StoreError`` for an invalid id
        (``INVALID_SESSION_ID``), an id already attached or being loaded
        (``SESSION_TRACKED``) or a closed store.
        """
        stored = len(session.events)
        loaded = self._loaded.get(session.id)
        if loaded is not None and loaded.session() is session:
            if loaded.released is not None:
                self._take_over(session, loaded.released)
                self._loaded.pop(session.id, None)
                return
            stored = loaded.stored
        self._track(session, header=None, seed=session.events[stored:])
        self._loaded.pop(session.id, None)

    def _take_over(self, session: Session, released: Tracked) -> None:
        """Attach the copy a load made of *released*: its buffer and cursor carry over.

        The tracking entry itself carries over while it is tracked, so a
        write of it still under way trims the copy's buffer as it commits.
        """
        seed = session.events[released.cursor :]
        if self._tracked.get(session.id) is not released:
            # Flushed and let go since the load: what it buffered is stored.
            self._track(session, header=released.header, seed=seed)
            return
        self._track(session, header=released.header, seed=seed, replacing=released)

    def attach_new(self, session: Session) -> None:
        """Start buffering a session that is not stored yet; its seed events are new.

        Nothing is written until the first flush, which writes header and events
        atomically (R11.3); that flush fails with ``SESSION_ALREADY_EXISTS`` if
        the id is stored. Synchronous and never blocks.
        """
        self._track(session, header=session.header, seed=session.events)

    def _track(
        self,
        session: Session,
        *,
        header: SessionHeader | None,
        seed: Sequence[Event],
        replacing: Tracked | None = None,
    ) -> None:
        """Start buffering *session*; *replacing*, a released entry of its id, is reused."""
        session_id = check_session_id(session.id)
        if self._closed:
            raise StoreError(f"{self._name} is closed", code="STORE_CLOSED")
        current = self._tracked.get(session_id)
        if current is not None and current is not replacing:
            if current.released:
                raise StoreError(
                    f"session {session_id!r} was released with its events buffered: "
                    "load it to take it over",
                    code="SESSION_TRACKED",
                )
            raise StoreError(f"session {session_id!r} is already attached", code="SESSION_TRACKED")
        if session_id in self._loading:
            raise StoreError(f"session {session_id!r} is being loaded", code="SESSION_TRACKED")
        if replacing is None:
            buffer = list(seed)
            cursor = len(session.events) - len(buffer)
            unsubscribe = session.observe(buffer.append)
            self._tracked[session_id] = Tracked(session, header, buffer, cursor, unsubscribe)
            return
        replacing.buffer[:] = seed
        replacing.session = session
        replacing.unsubscribe = session.observe(replacing.buffer.append)
        replacing.released = False

    async def flush(self, session: Session) -> None:
        """Make every buffered event of *session* durable (R7.49, R11.4).

        Returns once the events are committed (fsync / commit). Always a
        checkpoint. On failure raises ``StoreError`` naming the session and
        keeps the events buffered for a later flush. If cancelled once the
        write is queued for the writer or under way, the write still happens,
        unless the same cancel stops the writer before it takes the queued
        write; then, as when cancelled before queueing, the events stay
        buffered for the next flush.
        A session that is not attached has nothing to flush.
        """
        if self._commits_at_once():
            try:
                self._commit_at_once(session)
            finally:
                # Committed before the schedule point, so no cancel can lose the write.
                await trio.lowlevel.cancel_shielded_checkpoint()
            return
        tracked = self._pending(session)
        if tracked is None:
            self._check_outlived(session)
            if self._backend.blocking:
                await trio.lowlevel.checkpoint()
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()
            return
        try:
            [error] = await self._flush_many([tracked])
        except StoreError as exc:
            # Opening the storage or a closed store: the error says nothing of the session.
            raise StoreError(f"session {session.id!r}: {exc.message}", code=exc.code) from exc
        if error is not None:
            raise StoreError(error.message, code=error.code) from error

    def _check_outlived(self, session: Session) -> None:
        """Refuse the flush of an attached session that appended past its closed store.

        Closing stops buffering: what the session appended since reaches no
        buffer, and a flush that found nothing buffered would call it durable.
        """
        tracked = self._tracked.get(session.id)
        if not self._closed or tracked is None or tracked.session is not session:
            return
        unstored = len(session.events) - tracked.cursor
        if unstored > 0:
            raise StoreError(
                f"session {session.id!r}: {self._name} is closed; the {unstored} event(s) "
                "appended since its last commit are not stored",
                code="STORE_CLOSED",
            )

    def flush_nowait(self, session: Session) -> bool:
        """Commit *session*'s buffer at once if the backend never blocks.

        For an in-memory store this is :meth:`flush` without its schedule
        point. Returns ``False``, doing nothing, when the backend blocks, the
        store is closed, or a subclass overrides :meth:`flush` (its flush must
        run): then await :meth:`flush`. Raises ``StoreError`` like
        :meth:`flush`, keeping the events buffered.
        """
        if not self._commits_at_once() or type(self).flush is not BufferedStore.flush:
            return False
        self._commit_at_once(session)
        return True

    def _commits_at_once(self) -> bool:
        """Whether a flush commits synchronously: an open store over a backend that never blocks."""
        return not self._backend.blocking and not self._closed

    def _commit_at_once(self, session: Session) -> None:
        """Commit *session*'s buffer to a backend that never blocks, synchronously."""
        tracked = self._pending(session)
        if tracked is None:
            return
        if not self._opened:
            self._backend.open()
            self._opened = True
        error = self._committer.commit_at_once(tracked)
        if error is not None:
            raise StoreError(error.message, code=error.code) from error

    def _pending(self, session: Session) -> Tracked | None:
        """*session*'s tracking entry if it is attached and has buffered events."""
        tracked = self._tracked.get(session.id)
        if tracked is None or tracked.session is not session or not tracked.buffer:
            return None
        return tracked

    async def detach(self, session: Session) -> None:
        """Flush, then stop tracking *session* and give up its writer claim.

        If the flush fails or is cancelled, the session is released all the
        same: no longer attached, its unflushed events stay buffered (and its
        claim held) until the next :meth:`load` of its id takes them over, or
        a detach of it succeeds, or the store is closed. The error propagates.
        """
        loaded = self._loaded.get(session.id)
        await self._final_flush(session)
        if (
            loaded is not None
            and loaded.session() is session
            and self._loaded.get(session.id) is loaded
        ):
            # Loaded and let go without being attached: the claim its load took goes too.
            # Forgotten only now, so a detach cancelled in its flush can be done again.
            del self._loaded[session.id]
            await self._release(session)
            return
        tracked = self._tracked.get(session.id)
        if tracked is None or tracked.session is not session:
            return
        while tracked.buffer:  # appended while that flush was being written
            await self._final_flush(session)
        if self._tracked.get(session.id) is not tracked:
            return  # a detach of the session running alongside has let it go
        tracked.unsubscribe()
        del self._tracked[session.id]
        await self._release(session)

    async def _final_flush(self, session: Session) -> None:
        """Flush *session* for its detach; failing or cancelled, release it with its buffer."""
        try:
            await self.flush(session)
        except BaseException:
            tracked = self._tracked.get(session.id)
            if tracked is not None and tracked.session is session:
                tracked.unsubscribe()
                tracked.released = True
            raise

    async def _release(self, session: Session) -> None:
        """Give up *session*'s claim, unless its id is still tracked or loaded here."""
        loaded = self._loaded.get(session.id)
        if session.id in self._tracked or (loaded is not None and loaded.session() is not None):
            # A released buffer, or the copy a load took over, still writes the id.
            await trio.lowlevel.checkpoint()
            return
        # Shielded: once untracked, a claim kept by a cancel would lock the session until close.
        with trio.CancelScope(shield=True):
            await self._call(self._backend.release, f"session {session.id!r}", session.id)

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

    # -- reads ----------------------------------------------------------------

    async def load(self, session_id: str) -> Session:
        """Load a stored session, repairing a crashed tail durably (R11.8-R11.10).

        Claims the session for this store (a second writer elsewhere makes this
        raise ``SESSION_LOCKED``); the claim is given up by ``detach``. A
        session a failed or cancelled detach released is taken over: the
        session returned holds its stored events and its buffered ones, which
        stay buffered (written by the first flush once it is attached). Raises
        ``StoreError(SESSION_NOT_FOUND)`` if unknown and ``CorruptSessionError``
        naming the session and the problem if unloadable. While it runs, and
        until what it returned is attached or detached, loading the id again is
        refused (``SESSION_TRACKED``); so is attaching it while it runs.
        """
        check_session_id(session_id)
        await self._ensure_open()
        released = self._tracked.get(session_id)
        if released is not None and not released.released:
            raise StoreError(f"session {session_id!r} is attached and live", code="SESSION_TRACKED")
        if session_id in self._loading:
            # Its caller will attach what that load returns: a second copy could not be.
            raise StoreError(f"session {session_id!r} is being loaded", code="SESSION_TRACKED")
        loaded = self._loaded.get(session_id)
        if loaded is not None and loaded.session() is not None:
            # One writer per session: two copies would share one claim and drop each other's events.
            raise StoreError(
                f"session {session_id!r} is loaded and not yet attached or detached",
                code="SESSION_TRACKED",
            )
        with self._reserved(session_id):
            if released is None:
                session = await self._load_reserved(session_id)
            else:
                session = await self._load_released(released)
        stored = len(session.events) if released is None else released.cursor
        self._loaded[session_id] = Loaded(weakref.ref(session), stored, released)
        return session

    @contextlib.contextmanager
    def _reserved(self, session_id: str) -> Iterator[None]:
        """Refuse to attach *session_id* until this load is over: its repair writes that id."""
        self._loading.add(session_id)
        try:
            yield
        finally:
            self._loading.discard(session_id)

    async def _load_reserved(self, session_id: str) -> Session:
        what = f"session {session_id!r}"
        await self._call(self._backend.claim, what, session_id)
        try:
            recovered = await self._call(self._recover, what, session_id)
            if recovered.needs_write:
                await self._write_repair(session_id, recovered)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._call(self._backend.release, what, session_id)
            raise
        return recovered.session

    async def _load_released(self, released: Tracked) -> Session:
        """A copy of a released session with its buffered events, its claim made sure of."""
        session_id = released.session.id
        if released.header is None:
            # Still held unless the storage lost it (a dropped PostgreSQL connection).
            await self._call(self._backend.claim, f"session {session_id!r}", session_id)
        else:
            await trio.lowlevel.checkpoint()  # not stored yet: its first commit claims it
        return released.handed_over()

    async def inspect(self, session_id: str) -> Session:
        """Read a stored session without repairing or claiming it (its torn tail left out).

        The returned log may end inside a turn. Raises like :meth:`load`.
        """
        return (await self.inspect_recovered(session_id)).session

    async def inspect_recovered(self, session_id: str) -> Recovered:
        """:meth:`inspect`, also saying how many stored records its torn tail held.

        ``dropped`` counts the records a load would discard; the session holds
        the ``kept`` events before them and no closers.
        """
        check_session_id(session_id)
        await self._ensure_open()
        return await self._call(self._recover_plain, f"session {session_id!r}", session_id)

    def _recover(self, session_id: str) -> Recovered:
        return self._recover_read(session_id, repair=True)

    def _recover_plain(self, session_id: str) -> Recovered:
        return self._recover_read(session_id, repair=False)

    def _recover_read(self, session_id: str, *, repair: bool) -> Recovered:
        tears = self._backend.writes_can_tear
        return recover(self._read(session_id), session_id, repair=repair, writes_can_tear=tears)

    def _read(self, session_id: str) -> StoredLog:
        log = self._backend.read(session_id)
        if log is None:
            raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
        return log

    async def _write_repair(self, session_id: str, recovered: Recovered) -> None:
        batch = AppendBatch(
            session_id,
            recovered.kept,
            recovered.closers,
            truncate_to=recovered.kept if recovered.dropped else None,
        )
        request = Request(session_id, prebuilt=batch)
        try:
            await self._submit([request])
        except BaseException:
            if request.queued:
                # The writer still runs the repair, and its write claims the session:
                # the caller releases the claim only once that write is over.
                with trio.CancelScope(shield=True):
                    await request.done.wait()
            raise
        if request.error is not None:
            raise StoreError(request.error.message, code=request.error.code) from request.error

    async def list(self) -> list[SessionHeader]:
        """Headers of every stored session, oldest first; reads no events (R11.14).

        A stored session whose header cannot be read, names another id or
        holds a format version this build does not read is left out, with a
        warning naming it; :meth:`listing` says which.
        """
        listing = await self.listing()
        for skipped in listing.skipped:
            log.warning("skipping a session in the listing: %s", skipped.problem)
        return list(listing.headers)

    async def listing(self) -> Listing:
        """:meth:`list`, also naming each stored session it leaves out, and why."""
        await self._ensure_open()
        listing = await self._call(self._backend.listing, "listing sessions")
        return Listing(
            tuple(sorted(listing.headers, key=lambda header: (header.created_at, header.id))),
            tuple(sorted(listing.skipped, key=lambda skipped: skipped.stored_as)),
        )

    async def exists(self, session_id: str) -> bool:
        """Whether *session_id* is stored (an invalid id never is); reads no events.

        One lookup of the id in the backend (a key lookup, or one path per
        JSONL bucket), never a listing. Also true for a stored session whose
        header is corrupt, which :meth:`list` skips. Always a checkpoint.
        """
        await self._ensure_open()
        try:
            check_session_id(session_id)
        except StoreError:
            await trio.lowlevel.checkpoint()
            return False
        return await self._call(self._backend.contains, f"session {session_id!r}", session_id)

    def statistics(self) -> StoreStatistics:
        """Return a snapshot of buffers and commit counters; never blocks."""
        return StoreStatistics(
            tracked_sessions=sum(not item.released for item in self._tracked.values()),
            buffered_events=sum(len(item.buffer) for item in self._tracked.values()),
            write_seconds=self._committer.write_seconds,
            **self._committer.counters,
        )

    # -- plumbing -------------------------------------------------------------

    def _call(self, fn: Callable[..., T], what: str, *args: object) -> Awaitable[T]:
        return call_backend(self._backend, fn, what, *args)

    def __repr__(self) -> str:
        stats = self.statistics()
        state = "closed" if self._closed else "open" if self._opened else "unopened"
        return (
            f"<{self._name} {state} tracked={stats.tracked_sessions} "
            f"buffered={stats.buffered_events} commits={stats.commits}>"
        )
