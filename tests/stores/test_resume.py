"""Resume through the runtime on every store (R11.15-R11.18)."""

from __future__ import annotations

import errno
from collections.abc import Sequence
from functools import partial

import pytest
import trio

import retinue
from retinue._errors import CorruptSessionError, StoreError
from retinue.config import AgentEntry
from retinue.session import RequestHeader, Session, SessionHeader, TurnEnd, TurnStart
from retinue.stores._backend import AppendBatch
from retinue.stores._writebehind import BufferedStore
from retinue.supervisors import CONFIG_START_FAILED, ConfigStartFailure, start_configured_agents
from retinue.testing import (
    DelegatingStore,
    Reply,
    ScriptedModel,
    check_history_replay,
    check_session_invariants,
)
from tests.stores._kit import lines, open_tool_turn, run_turn
from tests.stores.conftest import StoreKit

OPTIONS = retinue.AgentOptions(model="m")


def _model() -> ScriptedModel:
    return ScriptedModel([Reply("noted", chunks=3)], repeat_last=True)


def _turn_starts(session: Session) -> list[int]:
    return [event.data.turn for event in session.events if isinstance(event.data, TurnStart)]


def _headers_after(session: Session, seq: int) -> list[str]:
    return [
        event.data.reason for event in session.events[seq:] if isinstance(event.data, RequestHeader)
    ]


async def test_resume_continues_seqs_turns_and_logs_a_resume_header(kit: StoreKit) -> None:
    """R11.16: after resume seqs continue, turn numbers continue, history replays, header says resume."""
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            agent = await rt.create_agent("writer", OPTIONS, session_id="resumable")
            await agent.ask("first")
            await agent.ask("second")
            before = lines(agent.session.events[:])
            await agent.dispose()
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            again = await rt.resume_agent("resumable", OPTIONS)
            assert lines(again.session.events[:]) == before
            result = await again.ask("third")
            assert result.reason.kind == "completed"
            session = again.session
    assert _turn_starts(session) == [1, 2, 3]
    assert _headers_after(session, len(before)) == ["resume"]
    check_session_invariants(session.events)
    check_history_replay(session.events)
    assert list(session.derive_messages()) == list(
        Session.from_events(session.header, session.events[:]).derive_messages()
    )
    async with kit.open() as store:
        stored = await store.load("resumable")
    assert lines(stored.events[:]) == lines(session.events[:])


async def test_events_a_resumed_agents_setup_appends_are_stored(kit: StoreKit) -> None:
    """R11.6, R11.16: the setup runs between the load and publication; what it appends is stored
    with the rest. Counted as stored already, it would never be written, and every later flush of
    the agent would fail as if another writer had appended."""

    def setup(agent: retinue.Agent) -> None:
        agent.session.append_custom("plugin/state", {"restored": True})

    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            agent = await rt.create_agent("writer", OPTIONS, session_id="resumable")
            await agent.ask("first")
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            again = await rt.resume_agent("resumable", OPTIONS, setup=setup)
            assert (await again.ask("second")).reason.kind == "completed"
            live = lines(again.session.events[:])
    async with kit.open() as store:
        stored = await store.load("resumable")
    assert lines(stored.events[:]) == live
    assert [event.type for event in stored.events].count("plugin/state") == 1


async def test_resume_after_a_crash_closes_the_turn_and_goes_on(kit: StoreKit) -> None:
    """R11.9, R11.15: a crashed open turn is closed on load; the resumed agent runs the next turn."""
    crashed = Session.create("crashed-agent")
    async with kit.open() as store:
        store.attach_new(crashed)
        run_turn(crashed)
        open_tool_turn(crashed)
        await store.flush(crashed)
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            agent = await rt.resume_agent("crashed-agent", OPTIONS)
            repaired = agent.session.events[len(crashed.events) :]
            end = repaired[-1].data
            assert isinstance(end, TurnEnd)
            assert end.reason.kind == "interrupted"
            result = await agent.ask("are you back?")
            assert result.reason.kind == "completed"
            session = agent.session
    assert _turn_starts(session) == [1, 2, 3]
    check_session_invariants(session.events)
    check_history_replay(session.events)


def _fail_writes(store: BufferedStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def write(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store._backend, "write", write)


def _claimed_at_first_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the stores claim a new id at its first write, not at its creation: as a store
    without ``claim_new`` does, so another writer can store the id before that write.

    Set to ``None``, which the stores take for no method, rather than deleted: put back
    after a deletion, it would come last in the class's namespace, and the API page,
    which lists methods in that order, would differ from the code for later tests."""
    monkeypatch.setattr(BufferedStore, "claim_new", None)


async def test_another_runtime_takes_over_a_session_whose_final_flush_failed(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.9, R11.15: an agent whose final flush fails leaves its session released in the
    store with the unflushed events, not owned by its runtime: a second runtime on the
    store resumes it while the first is still open, taking those events over, and its
    next checkpoint stores them with its own."""
    store = kit.open()
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=store) as first:
            agent = await first.create_agent("writer", OPTIONS, session_id="handed")
            await agent.ask("first")
            agent.inject("note")  # an idle injection turn, flushed on its own (R11.18)
            _fail_writes(store, monkeypatch)
            await agent.dispose()
            old = lines(agent.session.events[:])
            assert store.statistics().buffered_events > 0
            async with retinue.open_runtime(models=_model(), store=store) as second:
                again = await second.resume_agent("handed", OPTIONS)
                assert lines(again.session.events[: len(old)]) == old
                monkeypatch.undo()
                assert (await again.ask("second")).turn == 3
                live = lines(again.session.events[:])
    async with kit.open() as reopened:
        stored = await reopened.load("handed")
    assert lines(stored.events[:]) == live
    [warning] = [
        r.getMessage() for r in caplog.records if "final flush of session" in r.getMessage()
    ]
    assert "the session was released" in warning
    assert "the next load of the id takes it over" in warning


# -- configured restore-or-create (R13.3) on every store ---------------------------------------


class NoListing(DelegatingStore):
    """Delegates to a store whose sessions outlive one runtime; listing them fails the test.

    ``durable`` is true even over the memory kit, whose backend outlives each store it opens.
    """

    durable = True

    async def list(self) -> list[SessionHeader]:
        raise AssertionError("restore-or-create listed the whole store")


def _failures(rt: retinue.Runtime) -> list[ConfigStartFailure]:
    heard: list[ConfigStartFailure] = []
    rt.hooks.on(CONFIG_START_FAILED, heard.append)
    return heard


async def test_configured_session_id_is_created_then_restored_without_listing(
    kit: StoreKit,
) -> None:
    """R13.3: restore-or-create tells a missing session from a stored one without listing."""
    entry = AgentEntry("reviewer", session_id="reviewer-main", model="m")
    config = retinue.LoopConfig(agents=(entry,))
    sessions: list[Session] = []
    with trio.fail_after(60):
        for prompt in ("first", "second"):
            store = NoListing(kit.open())
            async with retinue.open_runtime(models=_model(), store=store, config=config) as rt:
                agent = rt.agents.get("reviewer-main")
                assert agent is not None, "the configured agent did not start"
                assert (await agent.ask(prompt)).reason.kind == "completed"
                sessions.append(agent.session)
    assert _turn_starts(sessions[-1]) == [1, 2]
    assert _headers_after(sessions[-1], 0) == ["initial", "resume"]


async def test_configured_session_id_reports_a_corrupt_header_instead_of_creating(
    record_kit: StoreKit,
) -> None:
    """R13.3, R13.4: a stored session whose header is corrupt is reported as corrupt."""
    await _stored_session(record_kit, "reviewer-main")
    record_kit.tamper_header("reviewer-main", "{not json")
    config = retinue.LoopConfig(agents=(AgentEntry("reviewer", session_id="reviewer-main"),))
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=record_kit.open()) as rt:
            heard = _failures(rt)
            assert await start_configured_agents(rt, config) == ()
    assert [failure.session_id for failure in heard] == ["reviewer-main"]
    error = heard[0].error
    assert isinstance(error, CorruptSessionError)
    assert error.code == "CORRUPT_HEADER"


async def _stored_session(kit: StoreKit, session_id: str) -> None:
    """Store one completed turn of *session_id* through the runtime."""
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            await (await rt.create_agent("writer", OPTIONS, session_id=session_id)).ask("hi")


async def test_a_failed_resume_gives_up_its_claim_on_the_session(kit: StoreKit) -> None:
    """R11.15, R12.7: a resume whose setup fails leaves the session free for another writer."""
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=kit.open()) as rt:
            agent = await rt.create_agent("writer", OPTIONS, session_id="claimed")
            await agent.ask("first")
            await agent.dispose()

            def failing_setup(_agent: retinue.Agent) -> None:
                raise RuntimeError("setup failed")

            with pytest.raises(RuntimeError, match="setup failed"):
                await rt.resume_agent("claimed", OPTIONS, setup=failing_setup)
            assert "claimed" not in rt.agents
            async with kit.open() as other:
                stored = await other.load("claimed")
                assert _turn_starts(stored) == [1]
                other.attach(stored)
                await other.detach(stored)
            again = await rt.resume_agent("claimed", OPTIONS)
            assert (await again.ask("second")).reason.kind == "completed"


async def test_a_runtime_sharing_a_store_leaves_another_runtimes_live_session_alone(
    kit: StoreKit,
) -> None:
    """R12.7, R12.9: a store shared by two runtimes tracks both runtimes' sessions; a creation
    or resume in one of an id the other has live is refused and leaves that session attached,
    so every later event of it is stored (a runtime settles only what its own teardown left)."""
    with trio.fail_after(60):
        async with (
            kit.open() as store,
            retinue.open_runtime(models=_model(), store=store) as first,
            retinue.open_runtime(models=_model(), store=store) as second,
        ):
            agent = await first.create_agent("writer", OPTIONS, session_id="shared")
            await agent.ask("stored")
            agent.send("queued")  # its turn may run while the other runtime is refused
            with pytest.raises(retinue.SessionError) as created:
                await second.create_agent("writer", OPTIONS, session_id="shared")
            assert created.value.code == "SESSION_ALREADY_EXISTS"
            with pytest.raises(retinue.StoreError) as resumed:
                await second.resume_agent("shared", OPTIONS)
            assert resumed.value.code == "SESSION_TRACKED"
            await agent.wait_idle()
            assert agent.status == "idle"
            assert (await agent.ask("again")).turn == 3
            await agent.dispose()
            loaded = await store.inspect("shared")
    assert lines(loaded.events[:]) == lines(agent.session.events[:])


@pytest.mark.parametrize("entered_first", ["together", "leaves", "stays"])
async def test_runtimes_in_sibling_tasks_share_a_store_whichever_exits_first(
    kit: StoreKit, entered_first: str
) -> None:
    """R11.6, R12.7: two runtimes given one store, each opened in a task of its own, share it
    without an ``async with store:`` around them: the first to exit leaves the store open for the
    other, whose turns are still stored, and the last exit closes it. Each order of entering is
    played: at the same moment, or one runtime inside before the other opens, so that the task that
    started the store's writer exits first or last. The entries share one writer: with a writer per
    entry, the exit of the task that had not started the remaining one would close that task's
    nursery from the wrong task (trio: "Cancel scope stack corrupted")."""
    store = kit.open()
    first_done = trio.Event()
    first_inside = trio.Event()
    agents: list[retinue.Agent] = []

    async def run(session_id: str, *, leave_first: bool) -> None:
        if entered_first not in ("together", session_id):
            await first_inside.wait()
        async with retinue.open_runtime(models=_model(), store=store) as rt:
            agent = await rt.create_agent("writer", OPTIONS, session_id=session_id)
            first_inside.set()
            agents.append(agent)
            await agent.ask("hello")
            if leave_first:
                await agent.dispose()
                return
            await first_done.wait()
            await agent.ask("still here")
        assert " closed " in repr(store)

    async def leave_first() -> None:
        await run("leaves", leave_first=True)
        first_done.set()
        assert " closed " not in repr(store)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(leave_first)
            nursery.start_soon(partial(run, "stays", leave_first=False))
    assert sorted(agent.id for agent in agents) == ["leaves", "stays"]
    async with kit.open() as reopened:
        for agent in agents:
            stored = await reopened.inspect(agent.id)
            assert lines(stored.events[:]) == lines(agent.session.events[:])


async def test_a_runtime_resumes_the_stored_session_once_its_stranded_create_lost_the_id(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.9, R11.3: an agent whose final flush failed before its new session was ever written
    leaves that session stranded in its runtime. Once another writer stores the id, the create can
    never be written: the runtime's resume of the id drops what was stranded, with a warning naming
    the session, and resumes the stored one, rather than failing ``SESSION_ALREADY_EXISTS`` on every
    try until the runtime closes. (A store claiming the id at its creation keeps the writer out.)"""
    store = kit.open()
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=store) as first:
            _claimed_at_first_write(monkeypatch)
            _fail_writes(store, monkeypatch)
            agent = await first.create_agent("writer", OPTIONS, session_id="raced")
            agent.inject("never stored")
            await agent.dispose()
            assert store.statistics().buffered_events > 0
            monkeypatch.undo()
            async with kit.open() as other:
                winner = Session.create("raced")
                other.attach_new(winner)
                run_turn(winner, "stored first")
                await other.detach(winner)
            again = await first.resume_agent("raced", OPTIONS)
            assert lines(again.session.events[: len(winner.events)]) == lines(winner.events[:])
            assert (await again.ask("second")).reason.kind == "completed"
            live = lines(again.session.events[:])
    async with kit.open() as reopened:
        assert lines((await reopened.load("raced")).events[:]) == live
    dropped = [r.getMessage() for r in caplog.records if "was dropped" in r.getMessage()]
    assert dropped, [r.getMessage() for r in caplog.records]
    assert "'raced'" in dropped[0]


async def test_an_agent_whose_create_lost_the_id_to_another_writer_leaves_nothing_stranded(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.9, R11.3: another writer stores an agent's id before the agent's first flush
    (the store claims it at that flush), so its create is refused as a duplicate. Its
    disposal drops the session with a warning naming it (the store keeps none of its
    events), rather than warning that they stay buffered for the next load, and the
    runtime resumes the stored session."""
    store = kit.open()
    _claimed_at_first_write(monkeypatch)
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=store) as first:
            agent = await first.create_agent("writer", OPTIONS, session_id="taken")
            async with kit.open() as other:
                winner = Session.create("taken")
                other.attach_new(winner)
                run_turn(winner, "stored first")
                await other.detach(winner)
            agent.inject("refused")
            await agent.dispose()
            assert store.statistics().buffered_events == 0
            again = await first.resume_agent("taken", OPTIONS)
            assert lines(again.session.events[:]) == lines(winner.events[:])
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "takes it over with them" in m], messages
    assert [m for m in messages if "'taken'" in m and "was dropped" in m], messages
