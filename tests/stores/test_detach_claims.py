"""A load of an id whose detach is giving up its claim: the loaded copy keeps the id claimed (R12.7)."""

from __future__ import annotations

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from tests.stores._kit import REAL_DEADLINE, HeldCall, lines, run_turn
from tests.stores.conftest import StoreKit


async def test_a_load_during_a_detachs_release_claims_the_session_anew(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a load of the id while its detach gives up the claim waits for the claim to go, then
    takes it again, so another store (another process) is refused the live copy (SESSION_LOCKED);
    taking the going claim as its own, the load would keep no second writer out once it went."""
    session = Session.create("held")
    run_turn(session)
    store = blocking_kit.open()
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            await store.flush(session)
            release = HeldCall(store._backend.release)
            monkeypatch.setattr(store._backend, "release", release)
            loaded: list[Session] = []

            async def load_during_the_release() -> None:
                await trio.to_thread.run_sync(release.reached.wait, REAL_DEADLINE)
                loaded.append(await store.load("held"))

            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(load_during_the_release)
                    nursery.start_soon(store.detach, session)
                    await trio.to_thread.run_sync(release.reached.wait, REAL_DEADLINE)
                    await trio.sleep(0.05)  # the load goes as far as it can meanwhile
                    release.proceed.set()
            finally:
                release.proceed.set()  # a failed test must not hold the release for good
            async with blocking_kit.open() as other:
                with pytest.raises(StoreError) as refused:
                    await other.load("held")
            await store.detach(loaded[0])
    assert refused.value.code == "SESSION_LOCKED"
    assert lines(loaded[0].events[:]) == lines(session.events[:])
