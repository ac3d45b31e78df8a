"""Storing a session's turns through a fresh store, for the store contract tests."""

from __future__ import annotations

from retinue.session import Session
from tests.stores._kit import run_turn
from tests.stores.conftest import StoreKit


async def store_turns(kit: StoreKit, session: Session, turns: int = 2) -> None:
    """Store *session* with *turns* complete turns through a fresh store."""
    async with kit.open() as store:
        store.attach_new(session)
        for number in range(turns):
            run_turn(session, f"message {number}")
            await store.flush(session)
        await store.detach(session)
