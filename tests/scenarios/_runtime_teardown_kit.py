"""A store whose final detach takes time, for the runtime teardown tests."""

from __future__ import annotations

import trio

from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore


class SlowDetach(DelegatingStore):
    """A memory store whose final detach takes a virtual second (a real commit takes time)."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.detached: list[str] = []

    async def detach(self, session: Session) -> None:
        await trio.sleep(1)
        await self.store.detach(session)
        self.detached.append(session.id)
