"""Letting go of a session in the store: a detach bounded by ``flush_timeout``."""

from __future__ import annotations

import trio

from retinue._errors import FAILURE_OF_TAKES, StoreError, StoreTimeoutError, failure_of
from retinue.session import Session
from retinue.stores import SessionStore

__all__ = ["DETACH_TIMEOUT", "detach_within"]

DETACH_TIMEOUT = "DETACH_TIMEOUT"
"""The code of a detach the store did not answer within ``flush_timeout``."""


async def detach_within(store: SessionStore, session: Session, limit: float) -> Exception | None:
    """Detach *session* from *store*, bounded by *limit* seconds (``flush_timeout``): a store
    that hangs must not keep the runtime from closing. Returns what went wrong, if anything."""
    failure: Exception = StoreTimeoutError(
        f"the store did not answer within {limit:g}s", code=DETACH_TIMEOUT
    )
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
