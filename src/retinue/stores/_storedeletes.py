"""Deleting stored sessions: a retention policy's one way to remove a session from a store."""

from __future__ import annotations

from collections.abc import Callable

import trio

from retinue._errors import StoreError

from ._ids import check_session_id
from ._storeloads import StoreLoads

__all__ = ["StoreDeletes"]


class StoreDeletes(StoreLoads):
    """Deletes of a :class:`~retinue.stores.BufferedStore`: under the session's claim, whole.

    A delete takes the claim a load takes, so it never removes a session that
    another store or process writes, and reserves the id as a load does, so no
    load, attach or claim of it in this store runs alongside.
    """

    async def delete(self, session_id: str) -> None:
        """Delete a stored session: its header and every event, in one step (R11.3).

        Raises ``StoreError``: ``INVALID_SESSION_ID`` as :meth:`load` does,
        ``SESSION_NOT_FOUND`` for an id not stored, ``SESSION_TRACKED`` for a
        session this store holds (attached, released with events buffered,
        loaded and not yet attached or detached, being loaded, created or
        deleted), and the refusal a load gets for one another store or process
        writes (``SESSION_LOCKED``): nothing is deleted then. A crash or cancel
        part-way leaves the session stored whole or deleted whole; a cancel
        before the storage is asked deletes nothing. Afterwards the id is stored
        no more, and a new session may be created under it. A fork keeps its
        own copy of its seed, so deleting its parent leaves it loadable. Always
        a checkpoint.
        """
        await trio.lowlevel.checkpoint()
        check_session_id(session_id)
        delete = getattr(type(self._backend), "delete", None)
        if delete is None:
            raise StoreError(
                f"{self._name}: its backend {type(self._backend).__name__} cannot delete sessions",
                code="UNSUPPORTED_OPERATION",
            )
        await self._ensure_open()
        while (releasing := self._releasing.get(session_id)) is not None:
            await releasing.wait()  # its claim is going: the stored session is deleted after
        if self._refuse_held(session_id, ": detach it first") is not None:
            raise StoreError(
                f"session {session_id!r} is released with its events buffered: detach it first",
                code="SESSION_TRACKED",
            )
        self._deleting.add(session_id)
        try:
            with self._reserved(session_id):
                await self._delete_claimed(session_id, delete)
        finally:
            self._deleting.discard(session_id)

    async def _delete_claimed(self, session_id: str, delete: Callable[..., None]) -> None:
        """Claim the session as a load does, delete it, then give the claim up.

        The release is shielded: a claim kept by a cancel would hold the id for
        no one (a creation of it refused) until the store closes.
        """
        what = f"session {session_id!r}"
        await self._call(self._backend.claim, what, session_id)
        try:
            await self._call(delete, what, self._backend, session_id)
        finally:
            with trio.CancelScope(shield=True):
                await self._call(self._backend.release, what, session_id)
