"""Letting go of a session in the store: a bounded detach and a claim given back."""

from __future__ import annotations

import logging

import trio

from retinue._errors import FAILURE_OF_TAKES, StoreError, failure_of
from retinue.session import Session
from retinue.stores import SessionStore

__all__ = ["detach_within", "release_claim"]

log = logging.getLogger("retinue.supervisors")


async def detach_within(store: SessionStore, session: Session, limit: float) -> Exception | None:
    """Detach *session* from *store*, bounded by *limit* seconds (``flush_timeout``): a store
    that hangs must not keep the runtime from closing. Returns what went wrong, if anything."""
    failure: Exception = TimeoutError(f"the store did not answer within {limit}s")
    with trio.move_on_after(limit):
        try:
            await store.detach(session)
        except FAILURE_OF_TAKES as exc:
            # Past the limit the cancel is real, for move_on_after; a stray one
            # propagated would cancel the runtime's nursery and every agent in it.
            failure = failure_of(exc, "the store's detach", StoreError)
        else:
            return None
    await trio.lowlevel.checkpoint()  # a store may fail before its first checkpoint
    return failure


async def release_claim(store: SessionStore, session: Session, limit: float) -> None:
    """Give up the writer claim ``load`` took for a session that was not started, bounded
    by *limit* seconds (``flush_timeout``): the release runs shielded, and a store that hangs
    would otherwise keep the failed resume, and the runtime's close waiting on it, for good."""
    # Not attached first: what its setup appended would then be written.
    failure = await detach_within(store, session, limit)
    if failure is not None:
        log.error(
            "releasing session %s after a failed resume failed: %s",
            session.id,
            failure,
            exc_info=failure,
        )
