"""A new agent's id, claimed in its store from its creation on (R12.7)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from retinue._errors import SessionError, StoreError
from retinue.stores import SessionStore
from retinue.stores._protocol import new_claims

__all__ = ["claimed_new"]

log = logging.getLogger("retinue.supervisors")


@asynccontextmanager
async def claimed_new(store: SessionStore, agent_id: str, limit: float) -> AsyncIterator[None]:
    """Refuse *agent_id* if *store* holds it, else hold it claimed while its agent is created.

    The claim passes to the session the creation attaches; a creation that fails
    or is aborted gives it up, so the id can be created again, waiting at most
    *limit* seconds (``flush_timeout``) for the store to do so. A store without
    ``claim_new`` and ``release_new`` (looked up on its class, as ``flush_nowait``
    is) is asked only whether the id is stored: its first flush claims it.
    """
    claims = new_claims(store)
    if claims is None:
        if await store.exists(agent_id):
            raise SessionError(
                f"session {agent_id!r} already exists", code="SESSION_ALREADY_EXISTS"
            )
        yield
        return
    claim, release = claims
    try:
        await claim(agent_id)
    except StoreError as exc:
        if exc.code != "SESSION_ALREADY_EXISTS":
            raise
        # As for a stored id: one error for an id taken, whether or not its holder has flushed.
        raise SessionError(exc.message, code=exc.code) from exc
    try:
        yield
    except BaseException:
        # Shielded, as the rollback it is, and bounded as every store call made while
        # closing or rolling back is: a store that hangs must not hold the creation, nor
        # the runtime's close, which waits for the creation to unwind.
        with trio.CancelScope(shield=True) as scope:
            scope.relative_deadline = limit
            try:
                await release(agent_id)
            except StoreError:
                log.exception("releasing the claim of %r after its creation failed", agent_id)
        if scope.cancelled_caught:
            _log_unreleased(agent_id, limit)
        raise


def _log_unreleased(agent_id: str, limit: float) -> None:
    log.error(
        "releasing the claim of %r after its creation failed: the store did not answer "
        "within %gs; it may hold the id, and refuse to create it again, until it lets "
        "the claim go",
        agent_id,
        limit,
    )
