"""A new agent's id, claimed in its store from its creation on (R12.7)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from retinue._errors import SessionError, StoreError
from retinue.stores import SessionStore

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
    claim = getattr(type(store), "claim_new", None)
    release = getattr(type(store), "release_new", None)
    if claim is None or release is None:
        if await store.exists(agent_id):
            raise _already_exists(agent_id)
        yield
        return
    try:
        await claim(store, agent_id)
    except StoreError as exc:
        if exc.code != "SESSION_ALREADY_EXISTS":
            raise
        # As for a stored id: one error for an id taken, whether or not its holder has flushed.
        raise _already_exists(agent_id) from exc
    try:
        yield
    except BaseException:
        with trio.CancelScope(shield=True):
            try:
                await release(store, agent_id)
            except StoreError:
                log.exception("releasing the claim of %r after its creation failed", agent_id)
        raise


def _already_exists(agent_id: str) -> SessionError:
    return SessionError(f"session {agent_id!r} already exists", code="SESSION_ALREADY_EXISTS")
