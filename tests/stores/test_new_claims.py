"""``claim_new``: a new session's id is its store's from the claim on, not from its first flush,
so two stores of one storage creating one id meet at the second one's claim (R12.2, R12.7)."""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.stores._jsonl import JSONLBackend
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import REAL_DEADLINE, attach_undrained, lines, refusal, run_turn
from tests.stores.conftest import StoreKit


def _taken(store: BufferedStore, session_id: str) -> Callable[[], Awaitable[object]]:
    return lambda: store.claim_new(session_id)


DUPLICATE = ("StoreError", "SESSION_ALREADY_EXISTS")


async def test_a_new_id_claimed_by_one_store_is_refused_to_another_until_released(
    blocking_kit: StoreKit,
) -> None:
    """Claimed by one store, an id no store has written is refused to another store of the
    same storage as a duplicate, and is free again once released."""
    with trio.fail_after(REAL_DEADLINE):
        async with blocking_kit.open() as first, blocking_kit.open() as second:
            await first.claim_new("s")
            assert await refusal(_taken(second, "s")) == DUPLICATE
            await first.release_new("s")
            await second.claim_new("s")
            assert await refusal(_taken(first, "s")) == DUPLICATE
            await second.release_new("s")
            assert not await first.exists("s")


async def test_the_claim_passes_to_the_attached_session_and_goes_with_its_detach(
    blocking_kit: StoreKit,
) -> None:
    """The claim of a new id is its attached session's: refused to another store before the
    first flush and after it, kept by a ``release_new`` once attached, and given up by the
    detach, after which the other store loads the whole log."""
    with trio.fail_after(REAL_DEADLINE):
        async with blocking_kit.open() as first, blocking_kit.open() as second:
            await first.claim_new("s")
            session = attach_undrained(first, "s")
            assert await refusal(_taken(second, "s")) == DUPLICATE
            await first.flush(session)
            await first.release_new("s")
            assert await refusal(_taken(second, "s")) == DUPLICATE
            assert await refusal(lambda: second.load("s")) == ("StoreError", "SESSION_LOCKED")
            await first.detach(session)
            assert await refusal(_taken(second, "s")) == DUPLICATE
            assert lines((await second.load("s")).events) == lines(session.events)


async def test_a_claim_refuses_a_stored_id_and_one_held_in_the_same_store(
    blocking_kit: StoreKit,
) -> None:
    """A stored id is refused as a duplicate; one this store claimed already is refused
    ``SESSION_TRACKED``, and so is a load of it, which would take its claim as its own."""
    with trio.fail_after(REAL_DEADLINE):
        async with blocking_kit.open() as first, blocking_kit.open() as second:
            old = Session.create("old")
            first.attach_new(old)
            run_turn(old)
            await first.detach(old)
            assert await refusal(_taken(first, "old")) == DUPLICATE
            assert await refusal(_taken(second, "old")) == DUPLICATE
            await first.claim_new("new")
            assert await refusal(_taken(first, "new")) == ("StoreError", "SESSION_TRACKED")
            assert await refusal(lambda: first.load("new")) == ("StoreError", "SESSION_TRACKED")
            assert await refusal(_taken(second, "new")) == DUPLICATE


async def test_closing_a_store_gives_up_its_claims_of_new_ids(blocking_kit: StoreKit) -> None:
    """A store closed while it holds a new id's claim lets another store create the id."""
    with trio.fail_after(REAL_DEADLINE):
        async with blocking_kit.open() as second:
            first = blocking_kit.open()
            async with first:
                await first.claim_new("s")
                assert await refusal(_taken(second, "s")) == DUPLICATE
            await second.claim_new("s")
            session = attach_undrained(second, "s")
            await second.detach(session)
            assert lines((await second.load("s")).events) == lines(session.events)


async def test_a_closed_stores_claims_are_free_as_its_close_returns(
    blocking_kit: StoreKit,
) -> None:
    """Not a moment later: PostgreSQL drops a closed connection's locks only as its backend
    exits, so a claim made right after the close would at times still find the id locked."""
    with trio.fail_after(REAL_DEADLINE):
        async with blocking_kit.open() as second:
            for attempt in range(30):
                async with blocking_kit.open() as first:
                    await first.claim_new(f"s{attempt}")
                await second.claim_new(f"s{attempt}")


async def test_a_first_write_that_fails_keeps_the_claim_for_its_retry(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new session whose first flush fails keeps its id claimed: another store's creation is
    still refused, and the retry stores the session."""
    with trio.fail_after(REAL_DEADLINE):
        async with blocking_kit.open() as first, blocking_kit.open() as second:
            await first.claim_new("s")
            session = attach_undrained(first, "s")
            with monkeypatch.context() as patch:
                patch.setattr(first._backend, "write", _failing_write)
                with pytest.raises(StoreError):
                    await first.flush(session)
            assert await refusal(_taken(second, "s")) == DUPLICATE
            await first.flush(session)
            await first.detach(session)
            assert lines((await second.load("s")).events) == lines(session.events)


def _failing_write(batches: object) -> list[StoreError | None]:
    raise OSError(errno.ENOSPC, "No space left on device")


async def test_a_jsonl_group_undone_after_linking_a_new_file_keeps_its_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSONL group that linked a claimed session's file in and then failed takes the file
    out again and keeps the id's creation marker: another store's creation is still refused."""
    synced: list[Path] = []

    def sync_directories(backend: JSONLBackend, directories: list[Path]) -> None:
        synced.extend(directories)  # the buckets of the files just linked in
        raise OSError(errno.EIO, "Input/output error")

    with trio.fail_after(REAL_DEADLINE):
        async with JSONLStore(tmp_path) as first, JSONLStore(tmp_path) as second:
            await first.claim_new("s")
            session = attach_undrained(first, "s")
            with monkeypatch.context() as patch:
                patch.setattr(JSONLBackend, "_sync_directories", sync_directories)
                with pytest.raises(StoreError):
                    await first.flush(session)
            assert len(synced) == 1
            assert not await second.exists("s")
            assert await refusal(_taken(second, "s")) == DUPLICATE
            await first.detach(session)
            assert lines((await second.load("s")).events) == lines(session.events)


async def test_a_claim_refused_as_a_duplicate_leaves_the_stored_session_to_other_stores(
    blocking_kit: StoreKit,
) -> None:
    """R12.2: ``second`` claims an id ``first`` stored and let go: refused as a duplicate,
    it keeps no hold on the session, which ``first`` loads again, and can go on writing."""
    with trio.fail_after(REAL_DEADLINE):
        async with blocking_kit.open() as first, blocking_kit.open() as second:
            old = Session.create("old")
            first.attach_new(old)
            run_turn(old)
            await first.detach(old)
            assert await refusal(_taken(second, "old")) == DUPLICATE
            again = await first.load("old")
            assert lines(again.events) == lines(old.events)
