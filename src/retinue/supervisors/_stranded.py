"""Sessions whose final flush (or a failed resume's claim release) failed: released by the
store, committed before their id is taken again."""

from __future__ import annotations

import logging
from typing import final

import attrs
import trio

from retinue._errors import StoreError, StoreTimeoutError
from retinue.loop import LoopServices
from retinue.session import Session

from ._detach import detach_within

__all__ = ["StrandedSessions"]

log = logging.getLogger("retinue.supervisors")
# What a store answers for a released session that is no longer this runtime's to
# store: its create lost the id to another writer, another load took it over, or
# it appended after its release. No later try can succeed.
_FINAL_FLUSH = "the final flush of a disposed agent"
_RELEASE = "the release of a failed resume's claim"
_NOT_OURS = frozenset({"SESSION_ALREADY_EXISTS", "SESSION_TAKEN_OVER", "SESSION_RELEASED"})


@final
@attrs.define(eq=False)
class StrandedSessions:
    """The sessions of a runtime's retired agents that its store failed to detach (R12.9).

    The store released each with its unflushed events buffered. Kept here
    rather than asked of the store: a store may be shared (with another
    runtime, or its owner) and knows what is attached, not what this runtime left.
    """

    _services: LoopServices = attrs.field(repr=False)  # the runtime's, shown in its repr
    _sessions: dict[str, Session] = attrs.field(factory=dict, init=False)
    # Of those, the ids whose store did not answer within flush_timeout: the runtime's
    # close does not wait for it once more, so that a hanging store cannot hold it open.
    _hung: set[str] = attrs.field(factory=set, init=False)
    # What each one's detach was, for the messages of a later try: by default a final flush.
    _kinds: dict[str, str] = attrs.field(factory=dict, init=False)

    async def detach(self, session: Session) -> None:
        """Let the store go of a retired agent's session; one it fails to is kept stranded."""
        failure = await self._detach_or_strand(session, _FINAL_FLUSH)
        if failure is not None:
            log.warning(
                "final flush of session %s failed: %s; the session was released with its "
                "unflushed events buffered in the store, and the next load of the id takes it "
                "over with them",
                session.id,
                failure,
            )

    async def release(self, session: Session) -> None:
        """Give up the writer claim ``load`` took for a session a failed resume did not
        start; one the store fails to let go is kept stranded, as a final flush's is, so a
        later resume of the id settles it first rather than find it still loaded."""
        failure = await self._detach_or_strand(session, _RELEASE)
        if failure is not None:
            log.error(
                "releasing session %s after a failed resume failed: %s; the next resume of "
                "the id tries again first",
                session.id,
                failure,
            )

    async def _detach_or_strand(self, session: Session, kind: str) -> Exception | None:
        """Detach *session* within ``flush_timeout`` (its *kind* of detach); what it failed
        with if it did and the session is kept stranded."""
        services = self._services
        failure = await detach_within(services.store, session, services.flush_timeout)
        if failure is None or _dropped(session.id, failure, kind):
            return None
        self._kinds[session.id] = kind
        # The store released the session, its unflushed events still buffered: the
        # next creation or resume of the id here commits them first, the next load
        # of it elsewhere takes them over, and closing the store drains them.
        self._sessions[session.id] = session
        if isinstance(failure, TimeoutError):
            self._hung.add(session.id)
        return failure

    async def settle(self, agent_id: str) -> None:
        """Commit and detach what a failed final flush left of *agent_id*'s session (R12.9).

        Called with the id reserved for a creation; a checkpoint only when there is
        something to settle. Bounded by ``flush_timeout`` like the teardown's own
        try. While the store still fails (or hangs), raises a ``StoreError`` and
        leaves the session for a later try; one the store says is no longer this
        runtime's to store is let go with a warning.
        """
        session = self._sessions.get(agent_id)
        if session is None:
            return  # noqa: ASYNC910 - nothing stranded: the caller awaits the store next
        services = self._services
        failure = await detach_within(services.store, session, services.flush_timeout)
        if failure is not None and not _dropped(agent_id, failure, self._kind(agent_id)):
            message = f"{self._kind(agent_id)} is still pending: {failure}"
            code = failure.code if isinstance(failure, StoreError) else "STORAGE_ERROR"
            error_class = (
                StoreTimeoutError if isinstance(failure, StoreTimeoutError) else StoreError
            )
            raise error_class(message, code=code) from failure
        # Settled by another close meanwhile, perhaps: only this session is let go.
        if self._sessions.get(agent_id) is session:
            del self._sessions[agent_id]
            self._kinds.pop(agent_id, None)
            self._hung.discard(agent_id)

    def _kind(self, agent_id: str) -> str:
        return self._kinds.get(agent_id, _FINAL_FLUSH)

    async def settle_all(self) -> None:
        """Try every failed final flush (or release) once more, together, as the runtime closes (R12.9).

        No creation or resume of their ids comes in this runtime any more: in a store
        that outlives the runtime their events would stay buffered until a load takes
        them over. One that fails again, or whose store hung, stays released in the
        store, for the next load of its id or the store's close.
        """
        async with trio.open_nursery() as nursery:
            for agent_id in self._sessions.keys() - self._hung:
                nursery.start_soon(self._settle_at_close, agent_id)

    async def _settle_at_close(self, agent_id: str) -> None:  # noqa: ASYNC910 - called for a stranded id, whose detach is awaited
        kind = self._kind(agent_id)
        try:
            await self.settle(agent_id)
        except StoreError as exc:
            log.warning(
                "%s (session %s) failed again as the runtime closed: %s; the session "
                "stays released with its unflushed events buffered in the store, for the next "
                "load of the id to take over or the store's close",
                kind,
                agent_id,
                exc.__cause__ or exc,
            )


def _dropped(session_id: str, failure: BaseException, kind: str) -> bool:
    """Whether *failure* of the *kind* of detach says the session is no longer this
    runtime's to store; warns if so."""
    if not (isinstance(failure, StoreError) and failure.code in _NOT_OURS):
        return False
    log.warning(
        "session %s was dropped from this runtime, %s having failed: %s",
        session_id,
        kind,
        failure,
    )
    return True
