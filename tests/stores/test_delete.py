"""Deleting a stored session (R11.3), run against every backend: what goes, what is refused, and
what a cancel leaves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores._writebehind import BufferedStore
from tests.stores._conformance_kit import store_turns
from tests.stores._kit import FlakyBackend, lines, run_turn
from tests.stores.conftest import StoreKit


async def _refusal(call: Awaitable[object]) -> StoreError:
    with pytest.raises(StoreError) as caught:
        await call
    return caught.value


async def test_delete_leaves_nothing_of_the_session_and_its_id_free(kit: StoreKit) -> None:
    """R11.3: once deleted, a session is neither stored, listed nor loadable, the other sessions
    stay as they were, and a new session can be created under its id, holding only its own events."""
    gone, kept = Session.create("gone", cwd="/srv/app"), Session.create("kept", cwd="/srv/app")
    await store_turns(kit, gone)
    await store_turns(kit, kept)
    async with kit.open() as store:
        await store.delete("gone")
        assert not await store.exists("gone")
        assert [header.id for header in await store.list()] == ["kept"]
        assert (await _refusal(store.load("gone"))).code == "SESSION_NOT_FOUND"
        assert (await _refusal(store.inspect("gone"))).code == "SESSION_NOT_FOUND"
        assert lines((await store.inspect("kept")).events) == lines(kept.events)
        again = Session.create("gone")
        store.attach_new(again)
        run_turn(again, "a new life")
        await store.detach(again)
    async with kit.open() as store:
        assert lines((await store.load("gone")).events) == lines(again.events)


async def test_delete_of_an_invalid_id_is_refused_as_a_load_is(kit: StoreKit) -> None:
    """R11.3: an id no store may hold is refused ``INVALID_SESSION_ID``, as a load refuses it."""
    async with kit.open() as store:
        for session_id in ("", "a/b", ".."):
            refused = await _refusal(store.delete(session_id))
            assert refused.code == (await _refusal(store.load(session_id))).code
            assert refused.code == "INVALID_SESSION_ID"


async def test_delete_of_an_id_not_stored_is_session_not_found_as_a_load_is(
    kit: StoreKit,
) -> None:
    """R11.3: deleting an id the store does not hold fails with the code a load of it fails with,
    naming it; deleting a session twice fails so the second time."""
    await store_turns(kit, Session.create("once"))
    async with kit.open() as store:
        missing = await _refusal(store.delete("missing"))
        assert missing.code == (await _refusal(store.load("missing"))).code
        assert missing.code == "SESSION_NOT_FOUND"
        assert "missing" in missing.message
        await store.delete("once")
        assert (await _refusal(store.delete("once"))).code == "SESSION_NOT_FOUND"


async def test_delete_is_always_a_checkpoint(kit: StoreKit) -> None:
    """R11.3: a delete is a checkpoint whether it deletes or is refused."""
    await store_turns(kit, Session.create("checked"))
    async with kit.open() as store:
        with trio.testing.assert_checkpoints():
            await store.delete("checked")
        with trio.testing.assert_checkpoints(), pytest.raises(StoreError):
            await store.delete("checked")
        with trio.testing.assert_checkpoints(), pytest.raises(StoreError):
            await store.delete("a/b")


async def test_delete_refuses_a_session_attached_or_loaded_here(kit: StoreKit) -> None:
    """R11.3: a session this store attached, or loaded and has not attached or detached yet, is
    refused ``SESSION_TRACKED`` and stays stored whole; once detached, it can be deleted."""
    session = Session.create("held")
    await store_turns(kit, session, turns=1)
    async with kit.open() as store:
        loaded = await store.load("held")
        refused = await _refusal(store.delete("held"))
        assert (refused.code, "held" in refused.message) == ("SESSION_TRACKED", True)
        store.attach(loaded)
        run_turn(loaded, "appended while attached")
        assert (await _refusal(store.delete("held"))).code == "SESSION_TRACKED"
        await store.detach(loaded)
        assert lines((await store.inspect("held")).events) == lines(loaded.events)
        await store.delete("held")
        assert not await store.exists("held")


async def test_delete_refuses_an_id_being_created_here(kit: StoreKit) -> None:
    """R11.3: an id this store claimed for a new session, or attached new and not yet flushed, is
    refused ``SESSION_TRACKED``: its creation goes on."""
    async with kit.open() as store:
        await store.claim_new("new")
        assert (await _refusal(store.delete("new"))).code == "SESSION_TRACKED"
        session = Session.create("new")
        store.attach_new(session)
        run_turn(session)
        assert (await _refusal(store.delete("new"))).code == "SESSION_TRACKED"
        await store.detach(session)
    async with kit.open() as store:
        assert lines((await store.load("new")).events) == lines(session.events)


def _paused(
    store: BufferedStore, name: str, reached: trio.Event, go_on: trio.Event
) -> Callable[[], None]:
    """Make the store's step *name* (an async method taking the id) wait for *go_on* once it has
    begun, setting *reached*; returns the undo."""
    original = getattr(store, name)

    async def paused(*args: object) -> object:
        reached.set()
        await go_on.wait()
        return await original(*args)

    setattr(store, name, paused)
    return lambda: delattr(store, name)


async def test_while_a_delete_runs_nothing_else_of_its_id_runs_here(kit: StoreKit) -> None:
    """R11.3: while a delete of an id runs, a load, delete, claim or new attach of it in the same
    store is refused ``SESSION_TRACKED`` naming the delete, and the delete then completes."""
    await store_turns(kit, Session.create("busy"))
    async with kit.open() as store, trio.open_nursery() as nursery:
        reached, go_on = trio.Event(), trio.Event()
        _paused(store, "_delete_claimed", reached, go_on)
        nursery.start_soon(store.delete, "busy")
        await reached.wait()
        for refused in (
            await _refusal(store.load("busy")),
            await _refusal(store.delete("busy")),
            await _refusal(store.claim_new("busy")),
        ):
            assert refused.code in {"SESSION_TRACKED", "SESSION_ALREADY_EXISTS"}
        assert "being deleted" in (await _refusal(store.load("busy"))).message
        with pytest.raises(StoreError, match="being deleted") as caught:
            store.attach_new(Session.create("busy"))
        assert caught.value.code == "SESSION_TRACKED"
        go_on.set()
    async with kit.open() as store:
        assert not await store.exists("busy")


async def test_delete_is_refused_while_a_load_of_the_id_runs(kit: StoreKit) -> None:
    """R11.3: a delete of an id a load of the same store is loading is refused ``SESSION_TRACKED``;
    the load returns the session whole."""
    session = Session.create("loading")
    await store_turns(kit, session)
    async with kit.open() as store, trio.open_nursery() as nursery:
        reached, go_on = trio.Event(), trio.Event()
        undo = _paused(store, "_load_reserved", reached, go_on)
        results: list[Session] = []

        async def load() -> None:
            results.append(await store.load("loading"))

        nursery.start_soon(load)
        await reached.wait()
        refused = await _refusal(store.delete("loading"))
        assert (refused.code, "being loaded" in refused.message) == ("SESSION_TRACKED", True)
        go_on.set()
    undo()
    assert lines(results[0].events) == lines(session.events)


async def test_a_fork_whose_parent_is_deleted_still_loads(kit: StoreKit) -> None:
    """R11.3, R4.25: a fork holds its own copy of its seed, so deleting its parent leaves the fork
    loadable whole, its header still naming the parent."""
    parent = Session.create("parent")
    await store_turns(kit, parent)
    fork = parent.fork("child")
    run_turn(fork, "the fork goes on")
    async with kit.open() as store:
        store.attach_new(fork)
        await store.detach(fork)
        await store.delete("parent")
    async with kit.open() as store:
        loaded = await store.load("child")
        assert loaded.header.parent_session == "parent"
        assert lines(loaded.events) == lines(fork.events)
        assert not await store.exists("parent")


async def test_a_delete_cancelled_before_it_starts_deletes_nothing(kit: StoreKit) -> None:
    """R11.3: a delete cancelled before it reaches the storage deletes nothing and holds nothing:
    the session loads whole afterwards, and a later delete deletes it."""
    session = Session.create("kept")
    await store_turns(kit, session)
    async with kit.open() as store:
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.delete("kept")
        assert scope.cancelled_caught
        assert lines((await store.inspect("kept")).events) == lines(session.events)
        await store.delete("kept")
        assert not await store.exists("kept")


async def test_a_delete_cancelled_once_it_holds_the_claim_deletes_nothing_and_lets_it_go(
    kit: StoreKit,
) -> None:
    """R11.3: a delete cancelled while it claims the session, before the storage is asked to
    delete it, deletes nothing and gives the claim up: another store loads the session whole."""
    session = Session.create("claimed")
    await store_turns(kit, session)
    async with kit.open() as store:
        backend = store._backend
        claim = backend.claim
        with trio.CancelScope() as scope:

            def claim_then_cancel(session_id: str) -> None:
                claim(session_id)
                if backend.blocking:
                    trio.from_thread.run_sync(scope.cancel)
                else:
                    scope.cancel()

            backend.claim = claim_then_cancel  # type: ignore[method-assign]
            try:
                await store.delete("claimed")
            finally:
                del backend.claim
        assert scope.cancelled_caught
        async with kit.open() as other:
            assert lines((await other.load("claimed")).events) == lines(session.events)


async def test_delete_of_a_closed_store_is_refused(kit: StoreKit) -> None:
    """R11.3: a closed store deletes nothing (``STORE_CLOSED``)."""
    await store_turns(kit, Session.create("after"))
    store = kit.open()
    async with store:
        pass
    assert (await _refusal(store.delete("after"))).code == "STORE_CLOSED"
    async with kit.open() as other:
        assert await other.exists("after")


class _DeletingFlakyBackend(FlakyBackend):
    """A flaky memory backend that deletes too."""

    def delete(self, session_id: str) -> None:
        self.inner.delete(session_id)


async def test_delete_refuses_a_session_released_with_its_events_buffered() -> None:
    """R11.3: a session whose detach failed, released with events buffered for a load to take
    over, is refused ``SESSION_TRACKED``: deleted, those events would be written into nothing.
    Taken over and detached, it is deleted."""
    backend = _DeletingFlakyBackend()
    store = BufferedStore(backend, name="FlakyStore")  # type: ignore[arg-type]
    session = Session.create("released")
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    run_turn(session, "buffered")
    backend.fail_next = True
    with pytest.raises(StoreError):
        await store.detach(session)
    refused = await _refusal(store.delete("released"))
    assert (refused.code, "released" in refused.message) == ("SESSION_TRACKED", True)
    taken = await store.load("released")
    store.attach(taken)
    await store.detach(taken)
    assert lines((await store.inspect("released")).events) == lines(session.events)
    await store.delete("released")
    assert not await store.exists("released")


async def test_a_store_whose_backend_cannot_delete_refuses_and_keeps_the_session() -> None:
    """R11.3: a store over a backend with no ``delete`` of its own (one written before deletes
    existed) refuses ``UNSUPPORTED_OPERATION`` and keeps the session."""
    store = BufferedStore(FlakyBackend(), name="FlakyStore")  # type: ignore[arg-type]
    session = Session.create("kept")
    store.attach_new(session)
    run_turn(session)
    await store.detach(session)
    assert (await _refusal(store.delete("kept"))).code == "UNSUPPORTED_OPERATION"
    assert await store.exists("kept")
