"""The store contract (SPEC 11.1-11.3), run against every backend: round trips, creates, listings,
ids, writers and buffering."""

from __future__ import annotations

import math

import pytest
import trio
import trio.lowlevel

from retinue._errors import CorruptSessionError, StoreError
from retinue._lossless import FrozenDict
from retinue._stream import TextDelta
from retinue.session import (
    CustomEvent,
    Session,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
)
from retinue.stores import MemoryStore
from tests.stores._conformance_kit import store_turns
from tests.stores._kit import flush_together, lines, run_turn
from tests.stores.conftest import StoreKit


async def test_store_round_trip_keeps_every_event_byte_identical(kit: StoreKit) -> None:
    """R11.2: the stored unit is the event verbatim, chunks included; load returns it unchanged."""
    session = Session.create("round-trip", cwd="/work/project")
    await store_turns(kit, session, turns=3)
    async with kit.open() as store:
        loaded = await store.load("round-trip")
    assert loaded.header == session.header
    assert lines(loaded.events[:]) == lines(session.events[:])
    assert any(event.type == "assistant/chunk" for event in loaded.events)


async def test_store_create_is_lazy_until_the_first_flush(kit: StoreKit) -> None:
    """R11.3: a created session with nothing flushed is neither listed nor stored."""
    async with kit.open() as store:
        session = Session.create("lazy")
        store.attach_new(session)
        await store.flush(session)
        assert await store.list() == []
        assert not await store.exists("lazy")
        run_turn(session)
        assert not await store.exists("lazy")
        await store.flush(session)
        assert await store.exists("lazy")
        assert [header.id for header in await store.list()] == ["lazy"]


async def test_store_appends_continue_after_load(kit: StoreKit) -> None:
    """R11.4: a loaded session appends at the stored next seq; seqs stay contiguous."""
    session = Session.create("continue")
    await store_turns(kit, session, turns=1)
    async with kit.open() as store:
        loaded = await store.load("continue")
        store.attach(loaded)
        run_turn(loaded, "again")
        await store.detach(loaded)
    async with kit.open() as store:
        again = await store.load("continue")
    assert [event.seq for event in again.events] == list(range(len(again.events)))
    assert lines(again.events[:]) == lines(loaded.events[:])
    assert again.last_turn == 2


async def test_store_load_of_unknown_session_raises_not_found(kit: StoreKit) -> None:
    """Loading an id that was never stored raises a typed error naming it."""
    async with kit.open() as store:
        with pytest.raises(StoreError, match="nobody") as caught:
            await store.load("nobody")
    assert caught.value.code == "SESSION_NOT_FOUND"


async def test_store_list_returns_headers_with_metadata(kit: StoreKit) -> None:
    """R11.14: list returns every stored header (cwd, parent, seed length) and nothing else."""
    parent = Session.create("parent", cwd="/srv/a")
    await store_turns(kit, parent, turns=1)
    child = parent.fork("child")
    async with kit.open() as store:
        store.attach_new(child)
        run_turn(child)
        await store.detach(child)
        headers = {header.id: header for header in await store.list()}
    assert headers["parent"] == parent.header
    assert headers["child"].parent_session == "parent"
    assert headers["child"].seed_length == len(parent.events)
    assert headers["child"].cwd == "/srv/a"


async def test_store_duplicate_id_is_refused_without_failing_the_group(kit: StoreKit) -> None:
    """R11.3: creating a stored id fails naming it; other sessions in the same commit succeed."""
    await store_turns(kit, Session.create("taken"), turns=1)
    async with kit.open() as store:
        duplicate, other = Session.create("taken"), Session.create("other")
        store.attach_new(duplicate)
        store.attach_new(other)
        run_turn(duplicate)
        run_turn(other)
        errors: list[StoreError] = []

        async def flush(session: Session) -> None:
            try:
                await store.flush(session)
            except StoreError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flush, duplicate)
            nursery.start_soon(flush, other)
        assert [error.code for error in errors] == ["SESSION_ALREADY_EXISTS"]
        assert "taken" in errors[0].message
        await store.detach(other)
        stored = await store.load("other")
        assert lines(stored.events[:]) == lines(other.events[:])
        original = await store.inspect("taken")
        assert original.last_turn == 1
        with pytest.raises(StoreError, match="taken"):
            await store.aclose()


def _unencodable() -> CustomEvent:
    """A custom event holding a NaN that slipped past validation: encoding it raises."""
    data = FrozenDict()
    dict.update(data, {"n": math.nan})
    return CustomEvent("metrics/sample", data)


async def test_store_unencodable_event_fails_only_its_own_flush(record_kit: StoreKit) -> None:
    """R11.5: an event that cannot be encoded fails its session's flush alone; the group's
    other sessions commit and the writer keeps serving later flushes."""
    good, bad = Session.create("good"), Session.create("bad")
    async with record_kit.open() as store:
        store.attach_new(good)
        store.attach_new(bad)
        run_turn(good)
        run_turn(bad)
        bad.append(_unencodable())
        errors = await flush_together(store, [good, bad])
        assert list(errors) == ["bad"]
        assert errors["bad"].code == "INVALID_JSON"
        assert errors["bad"].message.startswith("session 'bad': metrics/sample is not JSON: ")
        run_turn(good)
        await store.flush(good)
        await store.detach(good)
        with pytest.raises(StoreError, match="'bad'"):
            await store.aclose()
    async with record_kit.open() as store:
        loaded = await store.load("good")
    assert lines(loaded.events[:]) == lines(good.events[:])


def _with_unstorable_chunk(session: Session) -> int:
    """Log a turn holding a chunk, logged unchecked, whose stored line would not load back;
    its seq."""
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(StepStart(1, 1))
    seq = session.append_chunk(1, 1, TextDelta(True, "x"))
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, TurnEndReason.completed()))
    return seq


async def test_store_refuses_a_chunk_no_load_would_read_at_its_flush(
    record_kit: StoreKit,
) -> None:
    """R11.4, R4.5: a chunk logged unchecked (``append_chunk``) whose stored line would not load
    back fails its session's flush alone, coded as a value that is not JSON, not as a failure
    of the storage; the group's other sessions commit and nothing of the refused one is stored."""
    good, bad = Session.create("good"), Session.create("bad")
    async with record_kit.open() as store:
        store.attach_new(good)
        store.attach_new(bad)
        run_turn(good)
        seq = _with_unstorable_chunk(bad)
        errors = await flush_together(store, [good, bad])
        assert list(errors) == ["bad"]
        assert errors["bad"].code == "INVALID_JSON"
        assert errors["bad"].message == (
            f"session 'bad': assistant/chunk event seq {seq} is not storable: "
            "text-delta.index must be an integer (not a bool or float), got True"
        )
        await store.detach(good)
        with pytest.raises(StoreError, match="'bad'"):
            await store.aclose()
    async with record_kit.open() as store:
        assert not await store.exists("bad")
        assert lines((await store.load("good")).events[:]) == lines(good.events[:])


async def test_memory_store_load_refuses_a_chunk_no_load_would_read() -> None:
    """R11.8, R4.5: the memory store keeps events as objects, so a chunk logged unchecked that
    the stores writing lines refuse at their flush is stored; its load and inspect refuse it as
    theirs refuse a record they cannot read, naming the session, the event and the field,
    rather than hand back a session no other store would load."""
    bad = Session.create("bad")
    seq = _with_unstorable_chunk(bad)
    async with MemoryStore() as store:
        store.attach_new(bad)
        await store.detach(bad)
        for read in (store.load, store.inspect):
            with pytest.raises(CorruptSessionError) as caught:
                await read("bad")
            assert caught.value.code == "CORRUPT_SESSION"
            assert caught.value.message == (
                f"session 'bad': the stored log holds a value that is not JSON: event seq {seq}: "
                "assistant/chunk: text-delta.index must be an integer (not a bool or float), "
                "got True"
            )


async def test_store_attaching_a_live_id_twice_is_refused(kit: StoreKit) -> None:
    """R11.3: an id already tracked by the store cannot be attached again."""
    async with kit.open() as store:
        store.attach_new(Session.create("twice"))
        with pytest.raises(StoreError) as caught:
            store.attach_new(Session.create("twice"))
        assert caught.value.code == "SESSION_TRACKED"
        with pytest.raises(StoreError) as loading:
            await store.load("twice")
        assert loading.value.code == "SESSION_TRACKED"
        assert "inspect(id) reads what is stored of it without taking it" in loading.value.message


@pytest.mark.parametrize(
    "bad_id", ["a/b", "a\\b", "..", "", "line\nbreak", "nul\x00", "tab\tid", "\x7f"]
)
async def test_store_refuses_ids_with_separators_or_control_characters(
    kit: StoreKit, bad_id: str
) -> None:
    """An id with path separators or control characters gets a typed error naming the id."""
    async with kit.open() as store:
        with pytest.raises(StoreError) as caught:
            store.attach_new(Session.create(bad_id))
        assert caught.value.code == "INVALID_SESSION_ID"
        assert repr(bad_id) in caught.value.message
        with pytest.raises(StoreError):
            await store.load(bad_id)
        assert not await store.exists(bad_id)


@pytest.mark.parametrize(
    "long_id", ["a" * 512, "日本" * 256, "\U0001f600" * 512], ids=["ascii", "cjk", "astral"]
)
async def test_store_holds_ids_of_every_valid_length(kit: StoreKit, long_id: str) -> None:
    """R11.12: an id of up to 512 characters is stored, found, listed and loaded by every store."""
    session = Session.create(long_id)
    assert not await _exists(kit, long_id)
    await store_turns(kit, session)
    async with kit.open() as store:
        assert await store.exists(long_id)
        assert [header.id for header in await store.list()] == [long_id]
        loaded = await store.load(long_id)
    assert lines(loaded.events[:]) == lines(session.events[:])


async def _exists(kit: StoreKit, session_id: str) -> bool:
    async with kit.open() as store:
        return await store.exists(session_id)


async def test_store_aclose_drains_every_buffer(kit: StoreKit) -> None:
    """R11.6: events buffered but never flushed are written when the store closes; a
    closed store's statistics count no session attached and nothing buffered."""
    session = Session.create("drained")
    store = kit.open()
    async with store:
        store.attach_new(session)
        run_turn(session)
        run_turn(session)
        assert store.statistics().buffered_events == len(session.events)
    after = store.statistics()
    assert (after.tracked_sessions, after.buffered_events) == (0, 0)
    async with kit.open() as reopened:
        loaded = await reopened.load("drained")
    assert lines(loaded.events[:]) == lines(session.events[:])


async def test_store_flush_after_close_refuses_events_it_did_not_store(kit: StoreKit) -> None:
    """R7.49, R11.4: closing stops buffering, so what a session appends after its store has
    closed is never written; a flush then fails ``STORE_CLOSED`` (as a detach does), not
    return as if it were durable. A flush with nothing appended since the drain succeeds."""
    session = Session.create("outlived")
    store = kit.open()
    async with store:
        store.attach_new(session)
        run_turn(session)
    stored = lines(session.events[:])
    await store.flush(session)
    run_turn(session, "after the close")
    for let_go in (store.flush, store.detach):
        with pytest.raises(StoreError) as caught:
            await let_go(session)
        assert caught.value.code == "STORE_CLOSED"
        assert "'outlived'" in caught.value.message
    async with kit.open() as reopened:
        assert lines((await reopened.inspect("outlived")).events[:]) == stored


async def test_store_group_commit_shares_transactions(kit: StoreKit) -> None:
    """R11.6: many sessions flushing together share a few commits (one transaction / fsync each)."""
    sessions = [Session.create(f"agent-{index}") for index in range(100)]
    async with kit.open() as store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(store.flush, session)
        stats = store.statistics()
        assert stats.committed_events == sum(len(session.events) for session in sessions)
        if kit.kind != "memory":  # memory commits inline: nothing to share
            assert stats.commits <= 5
            assert stats.largest_group >= 20
        assert stats.buffered_events == 0
        assert len(await store.list()) == 100


async def test_store_events_appended_during_a_write_wait_for_the_next_flush(kit: StoreKit) -> None:
    """R11.6: a flush writes what was buffered when it started; later appends stay buffered."""
    session = Session.create("busy")
    async with kit.open() as store:
        store.attach_new(session)
        run_turn(session)
        first = len(session.events)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.flush, session)
            await trio.lowlevel.checkpoint()
            run_turn(session)
        assert store.statistics().buffered_events in {0, len(session.events) - first}
        await store.flush(session)
        assert store.statistics().buffered_events == 0
        await store.detach(session)
        loaded = await store.load("busy")
    assert lines(loaded.events[:]) == lines(session.events[:])


async def test_store_second_writer_on_a_session_is_refused(kit: StoreKit) -> None:
    """A second writer on the same session gets a typed error naming it; the first keeps writing."""
    session = Session.create("contested")
    await store_turns(kit, session, turns=1)
    async with kit.open() as first, kit.open() as second:
        mine = await first.load("contested")
        first.attach(mine)
        refusal: StoreError | None = None
        try:
            theirs = await second.load("contested")
        except StoreError as exc:
            refusal = exc
        else:
            second.attach(theirs)
            run_turn(mine)
            await first.flush(mine)
            run_turn(theirs)
            with pytest.raises(StoreError, match="contested") as caught:
                await second.flush(theirs)
            assert caught.value.code in {"SEQ_CONFLICT", "SESSION_LOCKED"}
            with pytest.raises(StoreError):
                await second.aclose()
        if kit.kind == "sqlite":  # claims are per-session lock files: refused at load (R12.7)
            assert refusal is not None
        if refusal is not None:
            assert refusal.code == "SESSION_LOCKED"
            assert "contested" in refusal.message
        run_turn(mine)
        await first.detach(mine)
    async with kit.open() as store:
        loaded = await store.load("contested")
    assert lines(loaded.events[:]) == lines(mine.events[:])


async def test_store_detach_stops_buffering(kit: StoreKit) -> None:
    """After detach the session's appends are no longer tracked; it can be attached again."""
    session = Session.create("detached")
    async with kit.open() as store:
        store.attach_new(session)
        run_turn(session)
        await store.detach(session)
        assert store.statistics().tracked_sessions == 0
        loaded = await store.load("detached")
        store.attach(loaded)
        run_turn(loaded)
        await store.detach(loaded)
        again = await store.load("detached")
    assert again.last_turn == 2


async def test_postgres_store_recovers_from_a_dropped_connection(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.5: a server-side disconnect fails one flush; the next flush reconnects and commits."""
    import psycopg

    from retinue.stores import PostgresStore

    dsn, schema = postgres_schema
    session = Session.create("reconnect")
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        await store.flush(session)
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'"
            )
        run_turn(session)
        failure: StoreError | None = None
        try:
            await store.flush(session)
        except StoreError as exc:  # the dropped connection may fail this one flush
            failure = exc
        if failure is not None:
            assert "'reconnect'" in failure.message
            await store.flush(session)
        await store.detach(session)
    async with PostgresStore(dsn, schema=schema) as store:
        loaded = await store.load("reconnect")
    assert lines(loaded.events[:]) == lines(session.events[:])


def test_store_durable_is_false_only_for_memory(kit: StoreKit) -> None:
    """Every backend but memory keeps sessions beyond the process, and says so."""
    assert kit.open().durable is (kit.kind != "memory")


async def test_store_failed_load_gives_up_its_claim(kit: StoreKit) -> None:
    """A load that fails leaves no writer claim behind: another store can then write the id."""
    async with kit.open() as first, kit.open() as second:
        with pytest.raises(StoreError) as caught:
            await first.load("ghost")
        assert caught.value.code == "SESSION_NOT_FOUND"
        ghost = Session.create("ghost")
        second.attach_new(ghost)
        run_turn(ghost)
        await second.detach(ghost)
        assert await first.exists("ghost")
