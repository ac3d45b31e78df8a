"""Loading stored sessions: claims, crash-tail repair, takeovers, and reads that claim nothing."""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import attrs
import trio

from retinue._errors import StoreError
from retinue.session import Event, Session, SessionHeader
from retinue.session._codec import decode_event, encode_event, encode_header

from ._backend import AppendBatch, Listing, StoredLog
from ._common import already_exists
from ._groupcommit import call_ended_on_cancel
from ._ids import check_session_id
from ._loader import Recovered, recover
from ._records import Loaded, Request, Tracked
from ._storelife import StoreLifetime

__all__ = ["StoreLoads"]

# A load takes the session for one writer; a reader wanting its events meant inspect.
_READ_INSTEAD = (
    ": one writer at a time takes it (inspect(id) reads what is stored of it without taking it)"
)

log = logging.getLogger("retinue.stores")

T = TypeVar("T")


class StoreLoads(StoreLifetime):
    """Loads and reads of a :class:`~retinue.stores.BufferedStore`.

    A load claims its session and repairs a crashed tail durably; a session
    that a failed or cancelled detach released is taken over with its buffer.
    """

    async def load(self, session_id: str) -> Session:
        """Load a stored session, repairing a crashed tail durably (R11.8-R11.10).

        Claims the session for this store (a second writer elsewhere makes this
        raise ``SESSION_LOCKED``); the claim is given up by ``detach``. A
        session a failed or cancelled detach released is taken over: the
        session returned holds its stored events and its buffered ones, which
        stay buffered (written by the first flush once it is attached), unless
        it was never stored and another writer has stored the id since: then
        its buffer is dropped and the stored session loaded. Raises
        ``StoreError(SESSION_NOT_FOUND)`` if unknown and ``CorruptSessionError``
        naming the session and the problem if unloadable. While it runs, and
        until what it returned is attached or detached, loading the id again is
        refused (``SESSION_TRACKED``); so is attaching it while it runs.
        """
        check_session_id(session_id)
        await self._ensure_open()
        while (releasing := self._releasing.get(session_id)) is not None:
            await releasing.wait()  # its claim is going: the stored session is loaded anew
        released = self._refuse_held(session_id, _READ_INSTEAD)
        with self._reserved(session_id):
            if released is not None and released.header is not None:
                released = await self._unless_stored_since(released)
            if released is None:
                session = await self._load_reserved(session_id)
            else:
                session = await self._load_released(released)
        stored = len(session.events) if released is None else released.cursor
        self._loaded[session_id] = Loaded(weakref.ref(session), stored, released)
        return session

    async def _unless_stored_since(self, released: Tracked) -> Tracked | None:
        """*released*, a session never stored, unless another writer has stored its id since.

        Its create could then never be written: its buffer is dropped (a flush of
        it fails ``SESSION_ALREADY_EXISTS``), and the load loads the stored
        session. Looked up between commits: a commit of its own create under way
        must not be taken for another writer's. Nor must its own create committed
        with its reply lost (a dropped connection): stored under its header with
        its first events, it is taken over as stored, and the rest stays buffered.
        """
        session_id = released.session.id
        async with self._committer.commit_lock:
            if released.header is None or self._tracked.get(session_id) is not released:
                return released  # its create was committed, or it was let go, meanwhile
            what = f"session {session_id!r}"
            if not await self._call(self._backend.contains, what, session_id):
                return released
            header = released.header
            events = (*released.session.events[: released.cursor], *released.pending())
            stored = await self._call(self._own_create, what, session_id, header, events)
            if stored is not None:
                released.stored_to(stored)
                released.header = None
                return released
            self._drop_refused(released, already_exists(session_id))
        log.warning(
            "%s: dropping the %d buffered event(s) of a detach that failed before its create "
            "was written: another writer has stored the id since",
            what,
            len(released.buffer),
        )
        return None

    def _own_create(
        self, session_id: str, header: SessionHeader, events: tuple[Event, ...]
    ) -> int | None:
        """How many of *events* are stored, if the stored session is their own create.

        It is when its header is *header* and its events begin *events*: what
        another writer created holds another header or other events, or else
        only what is already ours, so appending the rest to it loses nothing.
        """
        stored = self._recover_plain(session_id).session
        count = len(stored.events)
        if count > len(events) or encode_header(stored.header) != encode_header(header):
            return None
        if [_read_back(event) for event in stored.events] != [
            _read_back(event) for event in events[:count]
        ]:
            return None
        return count

    def _drop_refused(self, released: Tracked, refusal: StoreError) -> None:
        """Stop tracking *released*, whose create *refusal* refused: a flush of it fails so.

        So does a flush of every session released with that entry: one a load's copy
        took over held events that only the entry could have written.
        """
        del self._tracked[released.session.id]
        for session, let_go in list(self._let_go.items()):
            if let_go.entry() is released:
                self._let_go[session] = attrs.evolve(let_go, refusal=refusal)

    @contextlib.contextmanager
    def _reserved(self, session_id: str) -> Iterator[None]:
        """Refuse to attach *session_id* until this load is over: its repair writes that id."""
        self._loading.add(session_id)
        try:
            yield
        finally:
            self._loading.discard(session_id)

    def _refuse_held(self, session_id: str, hint: str) -> Tracked | None:
        """Refuse *session_id* if this store holds it for a writer: attached and live, being
        created, reserved by a load or a delete, or loaded and not yet attached or detached.

        Returns the released session it still tracks, if any. *hint* ends the
        refusals of a session a writer of this store has.
        """
        what = f"session {session_id!r}"
        tracked = self._tracked.get(session_id)
        if tracked is not None and not tracked.released:
            raise StoreError(f"{what} is attached and live{hint}", code="SESSION_TRACKED")
        if session_id in self._claimed_new:
            raise StoreError(f"{what} is being created", code="SESSION_TRACKED")
        if session_id in self._loading:
            # Its caller will attach what that load returns: a second copy could not be.
            raise StoreError(
                f"{what} is being {self._reserved_for(session_id)}", code="SESSION_TRACKED"
            )
        loaded = self._loaded.get(session_id)
        if loaded is not None and loaded.session() is not None:
            # One writer per session: two copies would share one claim and drop each other's events.
            raise StoreError(
                f"{what} is loaded and not yet attached or detached{hint}", code="SESSION_TRACKED"
            )
        return tracked

    def _reserved_for(self, session_id: str) -> str:
        """What reserved *session_id*, which :attr:`_loading` holds: a load or a delete."""
        return "deleted" if session_id in self._deleting else "loaded"

    def _claim_call(
        self, fn: Callable[..., T], what: str, *args: object, cancelled: bool = False
    ) -> Awaitable[T]:
        """:meth:`_call` for a claim, a load's read under it, or (*cancelled*) the release of a
        cancelled one: its worker thread, which a cancel waits for, may wait on a server that
        stopped answering; soon after the cancel, what it waits on is ended."""
        return call_ended_on_cancel(
            self._backend, fn, what, *args, threads=self._threads, cancelled=cancelled
        )

    async def _load_reserved(self, session_id: str) -> Session:
        what = f"session {session_id!r}"
        await self._claim_call(self._backend.claim, what, session_id)
        try:
            recovered = await self._claim_call(self._recover, what, session_id)
            if recovered.needs_write:
                await self._write_repair(session_id, recovered)
        except BaseException as exc:
            with trio.CancelScope(shield=True):
                cancelled = not isinstance(exc, Exception)
                await self._claim_call(self._backend.release, what, session_id, cancelled=cancelled)
            raise
        return recovered.session

    async def _load_released(self, released: Tracked) -> Session:
        """A copy of a released session with its buffered events, its claim made sure of."""
        session_id = released.session.id
        if released.header is None:
            # Still held unless the storage lost it (a dropped PostgreSQL connection).
            await self._claim_call(self._backend.claim, f"session {session_id!r}", session_id)
        else:
            await trio.lowlevel.checkpoint()  # not stored yet: its first commit claims it
        return released.handed_over()

    async def inspect(self, session_id: str) -> Session:
        """Read a stored session without repairing or claiming it (its torn tail left out).

        The returned log may end inside a turn. Raises like :meth:`load`. A
        cancel ends it at once, as it ends :meth:`list` and :meth:`exists`, even
        while its worker thread waits on storage (a server that stopped answering).
        """
        return (await self.inspect_recovered(session_id)).session

    async def inspect_recovered(self, session_id: str) -> Recovered:
        """:meth:`inspect`, also saying how many stored records its torn tail held.

        ``dropped`` counts the records a load would discard; the session holds
        the ``kept`` events before them and no closers.
        """
        check_session_id(session_id)
        await self._ensure_open()
        return await self._read_call(self._recover_plain, f"session {session_id!r}", session_id)

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
        listing = await self._read_call(self._backend.listing, "listing sessions")
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
        return await self._read_call(self._backend.contains, f"session {session_id!r}", session_id)


def _read_back(event: Event) -> str:
    """The line of *event* as a store reads it back and writes it again.

    A logged str may hold a surrogate pair as two code points (a stream chunk's
    text does): its line escapes them, and read back they are one character,
    written as such. Compared as written, a session's own stored events would
    differ from its live ones.
    """
    return encode_event(decode_event(encode_event(event)))
