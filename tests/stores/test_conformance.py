"""The store contract (SPEC 11.1-11.3), run against every backend."""

from __future__ import annotations

import errno
import math
import threading
from collections.abc import Sequence

import pytest
import trio
import trio.lowlevel
import trio.testing

from retinue._errors import CorruptSessionError, StoreError
from retinue._lossless import FrozenDict
from retinue.session import (
    CustomEvent,
    Session,
    SessionHeader,
    StepEnd,
    ToolResultEvent,
    TurnEnd,
)
from retinue.session._codec import encode_header
from retinue.stores._backend import AppendBatch
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import flush_together, lines, open_tool_turn, run_turn
from tests.stores.conftest import TEARING_KINDS, StoreKit


async def _stored(kit: StoreKit, session: Session, turns: int = 2) -> None:
    """Store *session* with *turns* complete turns through a fresh store."""
    async with kit.open() as store:
        store.attach_new(session)
        for number in range(turns):
            run_turn(session, f"message {number}")
            await store.flush(session)
        await store.detach(session)


async def test_store_round_trip_keeps_every_event_byte_identical(kit: StoreKit) -> None:
    """R11.2: the stored unit is the event verbatim, chunks included; load returns it unchanged."""
    session = Session.create("round-trip", cwd="/work/project")
    await _stored(kit, session, turns=3)
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
    await _stored(kit, session, turns=1)
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
    await _stored(kit, parent, turns=1)
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


async def test_store_list_does_not_read_events(record_kit: StoreKit) -> None:
    """R11.14: listing works even when every event record is corrupt."""
    session = Session.create("listed")
    await _stored(record_kit, session, turns=1)
    for index in range(len(session.events)):
        record_kit.tamper("listed", index, "{not json")
    async with record_kit.open() as store:
        assert [header.id for header in await store.list()] == ["listed"]


async def test_store_duplicate_id_is_refused_without_failing_the_group(kit: StoreKit) -> None:
    """R11.3: creating a stored id fails naming it; other sessions in the same commit succeed."""
    await _stored(kit, Session.create("taken"), turns=1)
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
        assert "InvalidJsonError" in errors["bad"].message
        run_turn(good)
        await store.flush(good)
        await store.detach(good)
        with pytest.raises(StoreError, match="'bad'"):
            await store.aclose()
    async with record_kit.open() as store:
        loaded = await store.load("good")
    assert lines(loaded.events[:]) == lines(good.events[:])


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
    await _stored(kit, session)
    async with kit.open() as store:
        assert await store.exists(long_id)
        assert [header.id for header in await store.list()] == [long_id]
        loaded = await store.load(long_id)
    assert lines(loaded.events[:]) == lines(session.events[:])


async def _exists(kit: StoreKit, session_id: str) -> bool:
    async with kit.open() as store:
        return await store.exists(session_id)


async def test_store_load_closes_an_open_turn_durably(kit: StoreKit) -> None:
    """R11.9: a log ending mid-turn gets an error result per unanswered call, step/end, turn/end{interrupted}."""
    session = Session.create("crashed")
    async with kit.open() as store:
        store.attach_new(session)
        run_turn(session)
        call_id = open_tool_turn(session)
        await store.flush(session)
    prefix = len(session.events)
    async with kit.open() as store:
        loaded = await store.load("crashed")
    closers = loaded.events[prefix:]
    assert [event.type for event in closers] == ["tool/result", "step/end", "turn/end"]
    result = closers[0].data
    assert isinstance(result, ToolResultEvent)
    assert result.call_id == call_id
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "interrupted"
    assert closers[0].source_event_seqs == (prefix - 1,)
    assert isinstance(closers[1].data, StepEnd)
    end = closers[2].data
    assert isinstance(end, TurnEnd)
    assert end.reason.kind == "interrupted"
    assert end.turn == 2
    assert {event.time for event in closers} == {session.events[-1].time}
    async with kit.open() as store:
        again = await store.load("crashed")
    assert lines(again.events[:]) == lines(loaded.events[:])


async def test_store_balanced_log_gets_no_closers(kit: StoreKit) -> None:
    """R11.9: an already balanced log is loaded unchanged."""
    session = Session.create("balanced")
    await _stored(kit, session, turns=2)
    async with kit.open() as store:
        loaded = await store.load("balanced")
    assert len(loaded.events) == len(session.events)


async def test_store_wrong_format_version_is_refused(kit: StoreKit) -> None:
    """R11.10, R11.14: a header version other than the current one makes the session
    unloadable, and the listing skips it with that problem, as it skips any it cannot load."""
    future = Session.from_events(SessionHeader(id="future", created_at=1, version=7), [])
    await _stored(kit, Session.create("current"), turns=1)
    async with kit.open() as store:
        store.attach_new(future)
        run_turn(future)
        await store.detach(future)
        with pytest.raises(CorruptSessionError, match="future") as caught:
            await store.load("future")
        listing = await store.listing()
    assert caught.value.code == "UNSUPPORTED_VERSION"
    assert [header.id for header in listing.headers] == ["current"]
    assert len(listing.skipped) == 1
    assert "format version 7 is not the supported version" in listing.skipped[0].problem


async def test_store_corrupt_record_in_committed_region_is_refused(record_kit: StoreKit) -> None:
    """R11.8: an unparsable event before the last turn/end makes the load fail; other sessions load."""
    await _stored(record_kit, Session.create("broken"), turns=2)
    healthy = Session.create("healthy")
    await _stored(record_kit, healthy, turns=1)
    record_kit.tamper("broken", 3, '{"seq": 3, "type": "user/message", "data": ')
    async with record_kit.open() as store:
        with pytest.raises(CorruptSessionError, match=r"'broken'.*event 3") as caught:
            await store.load("broken")
        assert caught.value.code == "CORRUPT_SESSION"
        assert len((await store.load("healthy")).events) == len(healthy.events)
    assert record_kit.record_count("broken") > 40


async def test_store_seq_gap_in_committed_region_is_refused(record_kit: StoreKit) -> None:
    """R11.8: a missing event inside the committed region makes the session unloadable."""
    await _stored(record_kit, Session.create("gappy"), turns=2)
    record_kit.tamper("gappy", 5, None)
    async with record_kit.open() as store:
        with pytest.raises(CorruptSessionError, match=r"'gappy'.*seq gap"):
            await store.load("gappy")


async def _crashed_after_two_turns(kit: StoreKit, session_id: str) -> Session:
    """Store two complete turns and a flushed open third one; return the session."""
    session = Session.create(session_id)
    async with kit.open() as store:
        store.attach_new(session)
        run_turn(session, "one")
        run_turn(session, "two")
        open_tool_turn(session)
        await store.flush(session)
    return session


def _last_turn_end(session: Session) -> int:
    return max(event.seq for event in session.events if isinstance(event.data, TurnEnd))


@pytest.mark.parametrize("damaged", ["last turn/end", "inside the open turn"])
async def test_store_damaged_record_past_the_last_turn_end_is_dropped_with_what_follows(
    tearing_kit: StoreKit, damaged: str, caplog: pytest.LogCaptureFixture
) -> None:
    """R11.8: a damaged record past the last complete turn/end starts the torn tail, even
    with well-formed records after it (a power loss keeps an unsynced write's later pages):
    the load keeps the events before it, closes the open turn, drops and truncates the
    rest, and warns naming the session and how many records it dropped."""
    session = await _crashed_after_two_turns(tearing_kit, "rotten")
    index = _last_turn_end(session) + (0 if damaged == "last turn/end" else 3)
    tearing_kit.tamper("rotten", index, '{"seq": 0, "type": "turn/enD", "data": {"tu')
    async with tearing_kit.open() as store:
        loaded = await store.load("rotten")
    assert lines(loaded.events[:index]) == lines(session.events[:index])
    assert isinstance(loaded.events[-1].data, TurnEnd)
    assert loaded.events[-1].data.reason.kind == "interrupted"
    assert tearing_kit.record_count("rotten") == len(loaded.events)
    dropped = len(session.events) - index
    assert any(
        "'rotten'" in record.getMessage()
        and f"dropping the {dropped} stored record(s)" in record.getMessage()
        for record in caplog.records
    )


async def test_store_damaged_record_before_a_well_formed_turn_end_is_refused(
    record_kit: StoreKit,
) -> None:
    """R11.8: a well-formed turn/end after a damaged record puts the damage inside the
    committed region: the load fails naming it, and nothing is truncated."""
    session = await _crashed_after_two_turns(record_kit, "rotten")
    index = _last_turn_end(session) - 2
    record_kit.tamper("rotten", index, '"type": "step/end"}')
    async with record_kit.open() as store:
        with pytest.raises(CorruptSessionError, match=rf"'rotten'.*event {index}\b") as caught:
            await store.load("rotten")
    assert caught.value.code == "CORRUPT_SESSION"
    assert "committed region" in caught.value.message
    assert record_kit.record_count("rotten") == len(session.events)


async def test_store_damaged_final_record_of_an_open_turn_is_dropped(
    tearing_kit: StoreKit,
) -> None:
    """R11.8: an unparsable last record after the committed region is the torn write: it is
    discarded and truncated, and the well-formed events before it are kept and closed."""
    session = await _crashed_after_two_turns(tearing_kit, "frayed")
    last = len(session.events) - 1
    tearing_kit.tamper("frayed", last, '{"seq": 0, "type": "tool/ca')
    async with tearing_kit.open() as store:
        loaded = await store.load("frayed")
    assert lines(loaded.events[:last]) == lines(session.events[:last])
    assert [event.type for event in loaded.events[last:]][-2:] == ["step/end", "turn/end"]
    assert tearing_kit.record_count("frayed") == len(loaded.events)


async def test_store_torn_tail_is_dropped_and_truncated(tearing_kit: StoreKit) -> None:
    """R11.8: a torn final fragment after the committed region is discarded, physically."""
    session = Session.create("torn")
    await _stored(tearing_kit, session, turns=2)
    tearing_kit.append_raw("torn", '{"seq": 999, "type": "turn/sta')
    async with tearing_kit.open() as store:
        loaded = await store.load("torn")
    assert lines(loaded.events[:]) == lines(session.events[:])
    assert tearing_kit.record_count("torn") == len(session.events)


async def test_store_open_tail_before_a_torn_fragment_is_kept_and_closed(
    tearing_kit: StoreKit,
) -> None:
    """R11.8: well-formed events after the last turn/end are preserved, then closed; garbage is dropped."""
    session = Session.create("half")
    async with tearing_kit.open() as store:
        store.attach_new(session)
        run_turn(session)
        open_tool_turn(session)
        await store.flush(session)
    tearing_kit.append_raw("half", "\x01garbage")
    async with tearing_kit.open() as store:
        loaded = await store.load("half")
    assert lines(loaded.events[: len(session.events)]) == lines(session.events[:])
    assert [event.type for event in loaded.events[len(session.events) :]] == [
        "tool/result",
        "step/end",
        "turn/end",
    ]
    assert tearing_kit.record_count("half") == len(loaded.events)


def _damage(kit: StoreKit, session: Session, damage: str) -> int:
    """Damage the stored log of *session* as *damage* says; the index of the first bad record."""
    last = len(session.events) - 1
    if damage == "appended fragment":
        kit.append_raw(session.id, '{"seq": 999, "type": "turn/sta')
        return last + 1
    index = {
        "last turn/end": _last_turn_end(session),
        "inside the open turn": _last_turn_end(session) + 3,
        "final record": last,
        "seq out of order": last,
    }[damage]
    text = lines(session.events[:])[index - 1] if damage == "seq out of order" else "\x01rot"
    kit.tamper(session.id, index, text)
    return index


@pytest.mark.parametrize(
    "damage",
    [
        "last turn/end",
        "inside the open turn",
        "final record",
        "appended fragment",
        "seq out of order",
    ],
)
async def test_store_that_commits_whole_writes_refuses_any_damaged_record(
    transactional_kit: StoreKit, damage: str
) -> None:
    """R11.8: a store that commits each write in a transaction never holds a torn write, so
    a damaged record or seq gap even past the last complete turn/end is damage to committed
    events: load and inspect fail naming the session and the record, and nothing is
    dropped or truncated (not even a second load repairs it)."""
    kit = transactional_kit
    session = await _crashed_after_two_turns(kit, "rotten")
    index = _damage(kit, session, damage)
    stored = kit.records("rotten")
    async with kit.open() as store:
        for read in (store.load, store.inspect, store.load):
            with pytest.raises(CorruptSessionError, match=rf"'rotten'.*event {index}\b") as caught:
                await read("rotten")
            assert caught.value.code == "CORRUPT_SESSION"
            assert "committed region" in caught.value.message
    assert kit.records("rotten") == stored


def test_store_writes_can_tear_only_in_files(kit: StoreKit) -> None:
    """R11.8: only the JSONL files can hold part of a write for a load to repair as a torn tail."""
    backend = kit.open()._backend
    assert backend.writes_can_tear is (kit.kind in TEARING_KINDS)


async def test_store_aclose_drains_every_buffer(kit: StoreKit) -> None:
    """R11.6: events buffered but never flushed are written when the store closes."""
    session = Session.create("drained")
    store = kit.open()
    async with store:
        store.attach_new(session)
        run_turn(session)
        run_turn(session)
        assert store.statistics().buffered_events == len(session.events)
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
    await _stored(kit, session, turns=1)
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


async def test_store_inspect_reads_without_repairing(kit: StoreKit) -> None:
    """Inspecting a crashed session shows its open turn and writes nothing."""
    session = Session.create("peek")
    async with kit.open() as store:
        store.attach_new(session)
        open_tool_turn(session)
        await store.flush(session)
    async with kit.open() as store:
        seen = await store.inspect("peek")
        assert seen.is_turn_open
        assert len((await store.inspect("peek")).events) == len(session.events)


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


@pytest.mark.parametrize(
    "header",
    [
        '{"type": "session", "id": ',
        '{"type": "session", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["truncated", "nested-too-deeply"],
)
async def test_store_corrupt_header_is_refused_and_skipped_by_list(
    record_kit: StoreKit, header: str
) -> None:
    """R11.14: a corrupt header makes only its session unloadable, naming it; list keeps
    serving the rest."""
    await _stored(record_kit, Session.create("headless"), turns=1)
    await _stored(record_kit, Session.create("fine"), turns=1)
    record_kit.tamper_header("headless", header)
    async with record_kit.open() as store:
        with pytest.raises(CorruptSessionError, match="'headless'") as caught:
            await store.load("headless")
        assert caught.value.code == "CORRUPT_HEADER"
        assert [header.id for header in await store.list()] == ["fine"]
        assert len((await store.load("fine")).events) > 0


async def test_store_listing_names_each_stored_session_it_skips(
    record_kit: StoreKit, caplog: pytest.LogCaptureFixture
) -> None:
    """R11.14: a stored session whose header is corrupt, or names an id other than the one it
    is stored under (a load refuses both), is left out of the listing and named with its
    problem; ``list`` logs a warning for each."""
    for session_id in ("corrupt", "fine", "impostor"):
        await _stored(record_kit, Session.create(session_id), turns=1)
    record_kit.tamper_header("corrupt", "{not json")
    record_kit.tamper_header("impostor", encode_header(SessionHeader(id="fine", created_at=1)))
    async with record_kit.open() as store:
        assert [header.id for header in await store.list()] == ["fine"]
        listing = await store.listing()
        assert [header.id for header in listing.headers] == ["fine"]
        problems = [skipped.problem for skipped in listing.skipped]
        assert len(problems) == 2
        assert "session 'corrupt': the header is not valid UTF-8 JSON" in problems[0]
        assert problems[1].endswith("session 'impostor': the stored header names session 'fine'")
    warnings = [record.getMessage() for record in caplog.records]
    assert [any(problem in warning for warning in warnings) for problem in problems] == [
        True,
        True,
    ]


async def test_store_exists_sees_a_stored_session_whose_header_is_corrupt(
    record_kit: StoreKit,
) -> None:
    """R13.3: ``exists`` tells stored from missing even where ``list`` skips a corrupt header."""
    await _stored(record_kit, Session.create("headless"), turns=1)
    record_kit.tamper_header("headless", "{not json")
    async with record_kit.open() as store:
        assert await store.list() == []
        assert await store.exists("headless")
        assert not await store.exists("never-stored")


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


def _fail_writes(store: BufferedStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every write of *store* fail (a full disk) until ``monkeypatch.undo()``."""

    def write(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store._backend, "write", write)


async def _released(
    store: BufferedStore,
    monkeypatch: pytest.MonkeyPatch,
    session_id: str,
    *,
    stored: bool,
    open_turn: bool = False,
) -> Session:
    """A session whose detach failed: a turn *stored* (else none), then one buffered, or
    with *open_turn* a turn that stopped after a tool call."""
    session = Session.create(session_id)
    store.attach_new(session)
    if stored:
        run_turn(session, "stored")
        await store.flush(session)
    if open_turn:
        open_tool_turn(session)
    else:
        run_turn(session, "buffered")
    _fail_writes(store, monkeypatch)
    with pytest.raises(StoreError, match="No space left"):
        await store.detach(session)
    monkeypatch.undo()
    return session


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "never-stored"])
async def test_store_failed_detach_releases_the_session_to_the_next_load(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch, stored: bool
) -> None:
    """A detach whose final flush fails still lets the session go, its unflushed events
    buffered: a load of the id takes it over with them (stored or not), and its attach
    writes them with the next flush. No event the session holds is lost."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "let-go", stored=stored)
        assert store.statistics().tracked_sessions == 0
        assert store.statistics().buffered_events > 0
        taken = await store.load("let-go")
        assert lines(taken.events[:]) == lines(session.events[:])
        store.attach(taken)
        run_turn(taken, "more")
        await store.detach(taken)
        assert store.statistics().buffered_events == 0
    async with kit.open() as store:
        loaded = await store.load("let-go")
    assert lines(loaded.events[:]) == lines(taken.events[:])


async def test_store_released_events_wait_for_a_load_that_attaches_or_the_close(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A takeover let go unattached leaves the released events buffered for the next load;
    meanwhile a new session under the id is refused, and closing the store writes them."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "kept", stored=True)
        await store.detach(await store.load("kept"))
        assert store.statistics().buffered_events > 0
        with pytest.raises(StoreError, match="load it to take it over") as caught:
            store.attach_new(Session.create("kept"))
        assert caught.value.code == "SESSION_TRACKED"
        taken = await store.load("kept")
        assert lines(taken.events[:]) == lines(session.events[:])
    async with kit.open() as store:
        loaded = await store.load("kept")
    assert lines(loaded.events[:]) == lines(session.events[:])


async def test_store_takeover_attached_after_its_buffer_was_written_stores_it_once(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A released session detached again, successfully, after a load took it over: its
    buffer is written then, and the copy's attach buffers only what is not stored yet."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "twice", stored=True)
        taken = await store.load("twice")
        await store.detach(session)
        assert store.statistics().buffered_events == 0
        store.attach(taken)
        run_turn(taken, "more")
        await store.detach(taken)
    async with kit.open() as store:
        loaded = await store.load("twice")
    assert lines(loaded.events[:]) == lines(taken.events[:])


async def test_store_released_session_ending_inside_a_turn_is_taken_over_closed(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.9: a released session that ends inside a turn is taken over with that turn
    closed, as a load closes a crashed one; the closers are written with its buffer."""
    async with kit.open() as store:
        session = await _released(store, monkeypatch, "open", stored=True, open_turn=True)
        taken = await store.load("open")
        assert not taken.is_turn_open
        assert lines(taken.events[: len(session.events)]) == lines(session.events[:])
        assert taken.events[-1].type == "turn/end"
        store.attach(taken)
        await store.detach(taken)
    async with kit.open() as store:
        loaded = await store.load("open")
    assert lines(loaded.events[:]) == lines(taken.events[:])


async def _cancel_once_blocked(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()


async def test_store_cancelled_detach_releases_the_session_to_the_next_load(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A detach cancelled before its final flush is written lets the session go like one
    that failed: its events stay buffered and the next load takes them over."""
    store = blocking_kit.open()
    assert store._backend.blocking
    write = store._backend.write
    writing, go_on = threading.Event(), threading.Event()

    def held_write(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        if batches[0].session_id == "other":
            writing.set()
            go_on.wait(60)
        return write(batches)

    monkeypatch.setattr(store._backend, "write", held_write)
    session, other = Session.create("cancelled"), Session.create("other")
    store.attach_new(session)
    store.attach_new(other)
    run_turn(session)
    run_turn(other)
    # No writer: each flush commits directly, one at a time, so the detach waits for other's.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.flush, other)
        await trio.to_thread.run_sync(writing.wait)
        with trio.CancelScope() as scope:
            nursery.start_soon(_cancel_once_blocked, scope)
            await store.detach(session)
        go_on.set()
    assert scope.cancelled_caught
    assert store.statistics().tracked_sessions == 1
    assert store.statistics().buffered_events == len(session.events)
    taken = await store.load("cancelled")
    store.attach(taken)
    await store.detach(taken)
    await store.aclose()
    async with blocking_kit.open() as store:
        loaded = await store.load("cancelled")
    assert lines(loaded.events[:]) == lines(session.events[:])
