"""The store contract on every backend for logs a crash or damage left behind (R11.8-R11.10,
R11.14): open turns closed, torn tails repaired, damaged records and headers refused or skipped."""

from __future__ import annotations

import pytest

from retinue._errors import CorruptSessionError
from retinue.session import Session, SessionHeader, StepEnd, ToolResultEvent, TurnEnd
from retinue.session._codec import encode_header
from tests.stores._conformance_kit import store_turns
from tests.stores._kit import lines, open_tool_turn, run_turn
from tests.stores.conftest import TEARING_KINDS, StoreKit


async def test_store_list_does_not_read_events(record_kit: StoreKit) -> None:
    """R11.14: listing works even when every event record is corrupt."""
    session = Session.create("listed")
    await store_turns(record_kit, session, turns=1)
    for index in range(len(session.events)):
        record_kit.tamper("listed", index, "{not json")
    async with record_kit.open() as store:
        assert [header.id for header in await store.list()] == ["listed"]


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
    await store_turns(kit, session, turns=2)
    async with kit.open() as store:
        loaded = await store.load("balanced")
    assert len(loaded.events) == len(session.events)


async def test_store_wrong_format_version_is_refused(kit: StoreKit) -> None:
    """R11.10, R11.14: a header version other than the current one makes the session
    unloadable, and the listing skips it with that problem, as it skips any it cannot load."""
    future = Session.from_events(SessionHeader(id="future", created_at=1, version=7), [])
    await store_turns(kit, Session.create("current"), turns=1)
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
    """R11.8: an unparsable event before the last turn/end makes the load fail naming the
    session once, the event and what is wrong with it; other sessions load."""
    await store_turns(record_kit, Session.create("broken"), turns=2)
    healthy = Session.create("healthy")
    await store_turns(record_kit, healthy, turns=1)
    record_kit.tamper("broken", 3, '{"seq": 3, "type": "user/message", "data": ')
    async with record_kit.open() as store:
        with pytest.raises(CorruptSessionError, match=r"'broken'.*event 3") as caught:
            await store.load("broken")
        assert caught.value.code == "CORRUPT_SESSION"
        assert "event 3 is corrupt (an event line is not valid UTF-8 JSON: " in caught.value.message
        assert caught.value.message.count("'broken'") == 1
        assert len((await store.load("healthy")).events) == len(healthy.events)
    assert record_kit.record_count("broken") > 40


async def test_store_seq_gap_in_committed_region_is_refused(record_kit: StoreKit) -> None:
    """R11.8: a missing event inside the committed region makes the session unloadable."""
    await store_turns(record_kit, Session.create("gappy"), turns=2)
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
        record.getMessage().count("'rotten'") == 1
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
    await store_turns(tearing_kit, session, turns=2)
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
    await store_turns(record_kit, Session.create("headless"), turns=1)
    await store_turns(record_kit, Session.create("fine"), turns=1)
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
        await store_turns(record_kit, Session.create(session_id), turns=1)
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


async def test_store_load_refuses_a_header_naming_another_session(record_kit: StoreKit) -> None:
    """R11.8, R11.14: a session stored under one id whose header names another (a log copied
    under a new name by hand) is refused on load, naming both, as the listing leaves it out:
    loaded, its events would be extended under the id the header names."""
    await store_turns(record_kit, Session.create("impostor"), turns=1)
    record_kit.tamper_header("impostor", encode_header(SessionHeader(id="fine", created_at=1)))
    async with record_kit.open() as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("impostor")
        with pytest.raises(CorruptSessionError):
            await store.inspect("impostor")
    assert caught.value.code == "CORRUPT_SESSION"
    assert "session 'impostor': the stored header names session 'fine'" in caught.value.message


async def test_store_exists_sees_a_stored_session_whose_header_is_corrupt(
    record_kit: StoreKit,
) -> None:
    """R13.3: ``exists`` tells stored from missing even where ``list`` skips a corrupt header."""
    await store_turns(record_kit, Session.create("headless"), turns=1)
    record_kit.tamper_header("headless", "{not json")
    async with record_kit.open() as store:
        assert await store.list() == []
        assert await store.exists("headless")
        assert not await store.exists("never-stored")
