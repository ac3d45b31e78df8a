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
async def claimed_new(store: SessionStore, agent_id: str) -> AsyncIterator[None]:
    """Refuse *agent_id* if *store* holds it, else hold it claimed while its agent is created.

    The claim passes to the session the creation attaches; a creation that fails
    or is aborted gives it up, so the id can be created again. A store without
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
        with trio.CancelScope(shield=True):
            try:
                await release(agent_id)
            except StoreError:
                log.exception("releasing the claim of %r after its creation failed", agent_id)
        raise
