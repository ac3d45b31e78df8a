"""Write-behind buffering over a storage backend: attach, flush, detach and release (R11.3-R11.7)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import NoReturn

import trio

from retinue._errors import StoreError
from retinue.session import Event, Session, SessionHeader

from ._common import already_exists
from ._ids import check_session_id
from ._records import LetGo, Tracked
from ._storedeletes import StoreDeletes

__all__ = ["BufferedStore"]


class BufferedStore(StoreDeletes):
    """A session store: per-session write-behind buffers over a :class:`StorageBackend`.

    Appends are buffered by a synchronous observer (R4.9, R11.6). ``flush`` is
    the durability checkpoint: inside ``async with store:`` one writer task
    commits every flush pending at that moment as one group (one transaction,
    one fsync), so many agents flushing together cost a few commits. Used
    without ``async with``, each flush commits on its own. Every blocking call
    runs in a worker thread. A failed write keeps the buffer for the next
    flush and never poisons later operations (R11.5).
    """

    # -- tracking -------------------------------------------------------------

    def attach(self, session: Session) -> None:
        """Start buffering *session*'s appends; events already in it count as stored.

        Of a session this store loaded, only the events it loaded count as
        stored: those appended since (by an agent's setup, before it is
        published) are written by the next flush. Synchronous and never
        blocks. Raises ``StoreError`` for an invalid id
        (``INVALID_SESSION_ID``), an id already attached or being loaded
        (``SESSION_TRACKED``) or a store closed or closing (``STORE_CLOSED``).
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
        the id is stored. The claim :meth:`claim_new` took of its id passes to
        it: its :meth:`detach` gives it up. Synchronous and never blocks.
        """
        self._track(session, header=session.header, seed=session.events)
        self._claimed_new.discard(session.id)

    async def claim_new(self, session_id: str) -> None:
        """Claim *session_id*, not stored, for a session :meth:`attach_new` attaches later.

        This store is the id's one writer from now on, not from its first flush:
        another store of the same storage (a second store of one SQLite file,
        another process) creating it meanwhile is refused, as this one is while
        another holds it. The claim passes to the session attached under the id;
        :meth:`release_new` gives it up if none is. Raises ``StoreError``:
        ``SESSION_ALREADY_EXISTS`` for an id stored or claimed by another writer,
        ``SESSION_TRACKED`` for one not stored but attached, loaded or claimed in this store,
        ``INVALID_SESSION_ID``, ``STORE_CLOSED``. The claim's blocking work runs in
        a worker thread, which a cancel waits for: a claim it took is then held, for
        the caller to release (it returns, and the cancel comes at its next checkpoint).
        One a server that stopped answering holds is ended soon after the cancel, its
        claim not taken (a PostgreSQL store's other claims may go with its lock connection).
        """
        check_session_id(session_id)
        await self._ensure_open()
        while (releasing := self._releasing.get(session_id)) is not None:
            await releasing.wait()  # a detach giving up its claim: claimed anew after it
        if self._held_here(session_id):
            await self._refuse_held_here(session_id)
        self._claimed_new.add(session_id)
        try:
            await self._claim_call(
                self._claim_new_in_backend, f"session {session_id!r}", session_id
            )
        except BaseException:
            self._claimed_new.discard(session_id)
            raise

    def _held_here(self, session_id: str) -> bool:
        loaded = self._loaded.get(session_id)
        return (
            session_id in self._tracked
            or session_id in self._loading
            or session_id in self._claimed_new
            or (loaded is not None and loaded.session() is not None)
        )

    async def _refuse_held_here(self, session_id: str) -> NoReturn:
        """Refuse a claim of an id this store holds: a duplicate if it is stored, else tracked."""
        what = f"session {session_id!r}"
        if await self._read_call(self._backend.contains, what, session_id):
            raise already_exists(session_id)
        raise StoreError(
            f"{what} is attached, loaded or being created in {self._name}", code="SESSION_TRACKED"
        )

    def _claim_new_in_backend(self, session_id: str) -> None:
        """The backend's own claim of a new id, if it has one, else a check that it is not stored.

        Looked up on its class: a backend written before this claim existed keeps working,
        claiming the id with its first write as before."""
        claim = getattr(type(self._backend), "claim_new", None)
        if claim is not None:
            claim(self._backend, session_id)
        elif self._backend.contains(session_id):
            raise already_exists(session_id)

    async def release_new(self, session_id: str) -> None:
        """Give up the claim :meth:`claim_new` took, unless a session was attached under the id.

        Always a checkpoint, never cut short by a cancel: a claim it kept would hold the
        id for no one until the store closes."""
        if session_id not in self._claimed_new:
            await trio.lowlevel.checkpoint()
            return
        self._claimed_new.discard(session_id)
        if self._closed:
            await trio.lowlevel.checkpoint()  # closing the storage released every claim
            return
        # A load or claim of the id meanwhile waits for the claim to go, as after a detach.
        given_up = self._releasing[session_id] = trio.Event()
        try:
            with trio.CancelScope(shield=True):
                await self._call(self._backend.release, f"session {session_id!r}", session_id)
        finally:
            if self._releasing.get(session_id) is given_up:
                del self._releasing[session_id]
            given_up.set()

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
        if self._closed or self._closing:
            # Attached while closing drains, it would be neither drained nor let go:
            # buffering every later append for a store that can no longer write it.
            state = "closed" if self._closed else "closing"
            raise StoreError(f"{self._name} is {state}", code="STORE_CLOSED")
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
            raise StoreError(
                f"session {session_id!r} is being {self._reserved_for(session_id)}",
                code="SESSION_TRACKED",
            )
        self._let_go.pop(session, None)  # attached again: observed from here on
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
        checkpoint, but for a store that commits without blocking (``MemoryStore``):
        it commits even when called cancelled, then yields without raising
        ``Cancelled``, so no cancel can lose the write. On failure raises ``StoreError`` naming the session and
        keeps the events buffered for a later flush. If cancelled once the
        write is queued for the writer or under way, the write still happens,
        unless the same cancel stops the writer before it takes the queued
        write; then, as when cancelled before queueing, the events stay
        buffered for the next flush. So they do when a flush committing on
        its own (no writer task) is cancelled while it waits for SQLite's write
        lock, or a PostgreSQL row or table lock, which another connection holds:
        nothing of it is written yet.
        A session that is not attached has nothing to flush, unless a failed or
        cancelled detach released it: events it appended since, or buffered
        events a load's attached copy has not stored yet, fail the flush
        (``SESSION_RELEASED``, ``SESSION_TAKEN_OVER``).
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
        let_go = self._let_go.get(session)
        if error is None and let_go is not None:
            # Its create refused while this flush waited (a load found the id stored since):
            # its buffer was dropped unwritten.
            error = let_go.refusal
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
        """Commit *session*'s log since its last commit to a backend that never blocks."""
        tracked = self._pending(session, unheard=True)
        if tracked is None:
            return
        if not self._opened:
            self._backend.open()
            self._opened = True
        error = self._committer.commit_at_once(tracked)
        if error is not None:
            raise StoreError(error.message, code=error.code) from error

    def _pending(self, session: Session, *, unheard: bool = False) -> Tracked | None:
        """*session*'s tracking entry if it is attached and has events to write.

        With *unheard*, events in its log count though its buffer is empty: a
        commit at once asked for during an announcement the store has not heard
        yet stores them (see ``Tracked.logged``).
        """
        tracked = self._tracked.get(session.id)
        if (
            tracked is None
            or tracked.session is not session
            or not (tracked.buffer or (unheard and len(session.events) > tracked.cursor))
        ):
            self._check_let_go(session)
            return None
        if tracked.released:
            self._check_let_go(session)
        return tracked

    def _check_let_go(self, session: Session) -> None:
        """Refuse the flush of a released session whose events this store cannot make durable.

        Released, it is observed no more: what it appended since reaches no
        buffer. Taken over by a load whose copy is attached, its buffered events
        are the copy's to write: until they are stored, a flush returning would
        call them durable.
        """
        let_go = self._let_go.get(session)
        if let_go is None:
            return
        if let_go.refusal is not None:
            raise StoreError(let_go.refusal.message, code=let_go.refusal.code)
        at_release, entry = let_go.events, let_go.entry
        appended = len(session.events) - at_release
        if appended > 0:
            raise StoreError(
                f"session {session.id!r} was released by a detach that failed or was "
                f"cancelled: the {appended} event(s) appended since are not stored (a load "
                "of the id takes over only what was buffered before)",
                code="SESSION_RELEASED",
            )
        # Only the entry it was released with carries its events: one tracked under the
        # id since then holds what was stored by the time it was attached.
        tracked = entry()
        if tracked is None or self._tracked.get(session.id) is not tracked:
            return
        if tracked.session is session or tracked.cursor >= at_release:
            return
        raise StoreError(
            f"session {session.id!r} was taken over by a later load after a detach that "
            f"failed or was cancelled released it: {at_release - tracked.cursor} of its "
            "events are not stored yet, and the flushes of that load's copy store them",
            code="SESSION_TAKEN_OVER",
        )

    async def detach(self, session: Session) -> None:
        """Flush, then stop tracking *session* and give up its writer claim.

        If the flush fails or is cancelled, the session is released all the
        same: no longer attached, its unflushed events stay buffered (and its
        claim held) until the next :meth:`load` of its id takes them over, or
        a detach of it succeeds, or the store is closed, or a write the cancel
        did not stop stores them all: its claim is then given up, as nothing
        is left for a load to take over. The error propagates.
        Flushed or detached again, the released session is refused
        (``SESSION_RELEASED``, ``SESSION_TAKEN_OVER``) while events it holds
        are not stored and no longer its to write. A new session whose create
        was refused because its id is stored (``SESSION_ALREADY_EXISTS``) keeps
        nothing buffered: no write could store it, and the next load loads the
        stored session; its flush and detach fail so again.
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
            self._let_go.pop(session, None)  # all it holds is stored: detached as any other
            return
        while tracked.buffer:  # appended while that flush was being written
            await self._final_flush(session)
        if self._tracked.get(session.id) is not tracked:
            return  # a detach of the session running alongside has let it go
        tracked.unsubscribe()
        del self._tracked[session.id]
        self._let_go.pop(session, None)  # released before, detached now: as any other
        await self._release(session)

    async def _final_flush(self, session: Session) -> None:
        """Flush *session* for its detach; failing or cancelled, release it with its buffer."""
        try:
            await self.flush(session)
        except BaseException as exc:
            self._let_go_of(session, exc)
            tracked = self._tracked.get(session.id)
            if tracked is not None and tracked.session is session:
                # Cancelled as its write stored everything: nothing is left for a load.
                await self._let_go_stored([tracked])
            raise

    def _let_go_of(self, session: Session, exc: BaseException) -> None:
        """Release *session*, attached, whose final flush failed with *exc*: its buffer stays.

        Unless its create was refused because the id is stored: no write could
        store it under that id, so it is dropped rather than kept for a load to
        return in place of the stored session (and for every close to fail on).
        """
        tracked = self._tracked.get(session.id)
        if tracked is None or tracked.session is not session:
            return
        if not tracked.released:
            tracked.unsubscribe()
            tracked.released = True
            self._let_go[session] = LetGo(len(session.events), weakref.ref(tracked))
        if (
            isinstance(exc, StoreError)
            and exc.code == "SESSION_ALREADY_EXISTS"
            and tracked.header is not None
        ):
            self._drop_refused(tracked, exc)

    async def _release(self, session: Session) -> None:
        """Give up *session*'s claim, unless its id is still tracked or loaded here."""
        loaded = self._loaded.get(session.id)
        if session.id in self._tracked or (loaded is not None and loaded.session() is not None):
            # A released buffer, or the copy a load took over, still writes the id.
            await trio.lowlevel.checkpoint()
            return
        # A load of the id meanwhile waits for the claim to go, then takes it again: finding
        # it still held, it would take it as its own and be left holding nothing once it went.
        previous = self._releasing.get(session.id)
        given_up = self._releasing[session.id] = trio.Event()
        try:
            # Shielded: once untracked, a claim kept by a cancel would lock the session until close.
            with trio.CancelScope(shield=True):
                if previous is not None:
                    await previous.wait()  # the writer letting go of it as released: after that
                await self._call(self._backend.release, f"session {session.id!r}", session.id)
        finally:
            if self._releasing.get(session.id) is given_up:
                del self._releasing[session.id]
            given_up.set()
