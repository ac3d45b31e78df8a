"""The end-of-turn flush on an in-memory store (R7.49, R11.4): committed, reported, never bypassed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing

import retinue
from retinue import Runtime, StoreError, TurnResult
from retinue.hooks import HookTimeoutError
from retinue.session import Session
from retinue.stores import MemoryStore, StoreTimeoutError
from retinue.stores._memory import MemoryBackend
from retinue.stores._writebehind import BufferedStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel, check_session_invariants
from tests.helpers import DEADLINE, OPTIONS, HeldFlush, last_end_reason, runtime
from tests.stores._kit import FlakyBackend


def _model() -> ScriptedModel:
    return ScriptedModel([Reply("answer")], repeat_last=True)


class _CountingWrapper(DelegatingStore):
    def __init__(self, store: BufferedStore) -> None:
        super().__init__(store)
        self.flushes = 0

    async def flush(self, session: Session) -> None:
        self.flushes += 1
        await self.store.flush(session)


class _CountingStore(BufferedStore):
    """An in-memory store whose class extends ``flush``."""

    def __init__(self) -> None:
        super().__init__(MemoryBackend(), name="counting")
        self.flushes = 0

    async def flush(self, session: Session) -> None:
        self.flushes += 1
        await super().flush(session)


async def test_every_turn_commits_its_events_to_an_in_memory_store(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.49, R11.7: when ``ask`` returns, every event of the turn is committed, none left buffered."""
    store = MemoryStore()
    async with runtime(_model(), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        for prompt in ("one", "two"):
            await agent.ask(prompt)
            stats = store.statistics()
            assert (stats.buffered_events, stats.committed_events) == (0, len(agent.session.events))


def _failing_once() -> tuple[FlakyBackend, BufferedStore]:
    """A memory store whose backend fails its next write (``backend.fail_next``)."""
    backend = FlakyBackend()
    return backend, BufferedStore(backend, name="failing-once")  # type: ignore[arg-type]


def _reported_errors(rt: Runtime) -> list[BaseException]:
    """The errors ``agent/error`` reports from now on."""
    reported: list[BaseException] = []
    rt.hooks.on("agent/error", lambda _a, _turn, _step, error: reported.append(error))
    return reported


async def test_a_failing_in_memory_commit_is_reported_and_kept_for_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.49, R11.5: the failure reaches ``agent/error`` only; the events stay buffered and commit next turn."""
    backend, store = _failing_once()
    async with runtime(_model(), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported = _reported_errors(rt)
        backend.fail_next = True
        assert (await agent.ask("one")).reason.kind == "completed"
        assert [type(error) for error in reported] == [StoreError]
        assert "No space left" in str(reported[0])
        assert store.statistics().buffered_events == len(agent.session.events)
        assert (await agent.ask("two")).reason.kind == "completed"
        assert store.statistics().buffered_events == 0
        assert len(reported) == 1
        check_session_invariants(agent.session.events)


async def test_a_failing_store_still_runs_the_session_flush_listeners(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.23, R7.49: the store's write and the ``session/flush`` listeners are peers: a
    store failure skips no listener, and each failure is reported on its own."""
    backend, store = _failing_once()
    async with runtime(_model(), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported = _reported_errors(rt)
        flushed: list[int] = []

        async def listener(_agent: object, session: Session) -> None:
            flushed.append(len(session.events))
            raise RuntimeError("listener down")

        rt.hooks.on("session/flush", listener, agent=agent)
        backend.fail_next = True
        assert (await agent.ask("one")).reason.kind == "completed"
        assert flushed == [len(agent.session.events)]
        assert sorted(type(error).__name__ for error in reported) == ["RuntimeError", "StoreError"]
        assert store.statistics().buffered_events == len(agent.session.events)
        check_session_invariants(agent.session.events)


class _DelayedWrapper(DelegatingStore):
    """A wrapper whose flush takes *delay* seconds before committing."""

    def __init__(self, store: BufferedStore, delay: float) -> None:
        super().__init__(store)
        self.delay = delay

    async def flush(self, session: Session) -> None:
        await trio.sleep(self.delay)
        await self.store.flush(session)


@pytest.mark.parametrize("slow", ["store", "listener"])
async def test_a_flush_past_its_timeout_is_reported_naming_the_part_that_ran_late(
    autojump_clock: trio.testing.MockClock, slow: str
) -> None:
    """R4.23, R7.49: the store's flush and the ``session/flush`` listeners run concurrently
    under one ``flush_timeout``; the part that overran is named, the other one finished."""
    memory = MemoryStore()
    store = _DelayedWrapper(memory, 100 if slow == "store" else 0)
    async with runtime(_model(), store=store, flush_timeout=5) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported = _reported_errors(rt)
        heard: list[float] = []

        async def listener(_agent: object, _session: Session) -> None:
            await trio.sleep(100 if slow == "listener" else 1)
            heard.append(trio.current_time())

        rt.hooks.on("session/flush", listener, agent=agent)
        started = trio.current_time()
        assert (await agent.ask("one")).reason.kind == "completed"
        assert trio.current_time() - started == pytest.approx(5)
        [error] = reported
        assert isinstance(error, TimeoutError)
        late = "the store's flush" if slow == "store" else "the session/flush listeners"
        assert str(error).endswith(f"timed out: {late} ran past 5s")
        if slow == "store":
            assert heard == [pytest.approx(started + 1)]
            assert memory.statistics().buffered_events == len(agent.session.events)
        else:
            assert heard == []
            assert memory.statistics().buffered_events == 0
        check_session_invariants(agent.session.events)


_LATE = {
    "store": "the store's flush",
    "listener": "the session/flush listeners",
    "both": "the store's flush and the session/flush listeners",
}


@pytest.mark.parametrize("slow", list(_LATE))
async def test_a_flush_past_its_timeout_reaches_agent_error_coded_and_typed_by_the_late_part(
    autojump_clock: trio.testing.MockClock, slow: str
) -> None:
    """R7.49, R7.45: the timeout ``agent/error`` reports is coded ``FLUSH_TIMEOUT`` and a
    ``TimeoutError``, its message naming the parts that ran late; a ``StoreTimeoutError`` (a
    ``StoreError``, as the store's own failures are) while the store's flush was unfinished, a
    ``HookTimeoutError`` when only the listeners were: a listener keeping a backup copy of the
    turn must not read the store as having failed it. The limit prints as given (``5.0``: 5s)."""
    store = _DelayedWrapper(MemoryStore(), 0 if slow == "listener" else 100)
    async with runtime(_model(), store=store, flush_timeout=5.0) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported = _reported_errors(rt)

        async def listener(_agent: object, _session: Session) -> None:
            await trio.sleep(1 if slow == "store" else 100)

        rt.hooks.on("session/flush", listener, agent=agent)
        assert (await agent.ask("one")).reason.kind == "completed"
        [error] = reported
        if slow == "listener":
            assert isinstance(error, HookTimeoutError)
            assert not isinstance(error, StoreError)
        else:
            assert isinstance(error, StoreTimeoutError)
        assert isinstance(error, TimeoutError)
        assert error.code == "FLUSH_TIMEOUT"
        assert (
            error.message == f"flush of session {agent.id!r} timed out: {_LATE[slow]} ran past 5s"
        )


@pytest.mark.parametrize(
    "make_store",
    [lambda: _CountingWrapper(MemoryStore()), _CountingStore],
    ids=["delegating-wrapper", "subclass"],
)
async def test_a_store_s_own_flush_is_awaited_every_turn(
    autojump_clock: trio.testing.MockClock,
    make_store: Callable[[], _CountingWrapper | _CountingStore],
) -> None:
    """R7.49: a wrapper or subclass of a memory store is flushed through its own ``flush``."""
    store = make_store()
    async with runtime(_model(), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("one")
        await agent.ask("two")
        assert store.flushes == 2
        assert store.statistics().buffered_events == 0


class _NowaitCountingStore(BufferedStore):
    """An in-memory store recording which sessions took the synchronous ``flush_nowait`` path."""

    def __init__(self) -> None:
        super().__init__(MemoryBackend(), name="nowait-counting")
        self.nowait: list[Session] = []

    def flush_nowait(self, session: Session) -> bool:
        self.nowait.append(session)
        return super().flush_nowait(session)


async def test_another_agent_s_scoped_flush_listener_leaves_this_agent_on_the_fast_path(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.49, R6.1: only a global listener or this agent's own ``session/flush`` listener
    sends its end-of-turn flush through the shielded, awaited path; another agent's
    scoped listener does not."""
    store = _NowaitCountingStore()
    async with runtime(_model(), store=store) as rt:
        a = await rt.create_agent("a", OPTIONS)
        b = await rt.create_agent("b", OPTIONS)
        heard: list[Session] = []
        rt.hooks.on("session/flush", lambda _agent, session: heard.append(session), agent=b)

        store.nowait.clear()
        await a.ask("one")
        assert store.nowait == [a.session]
        assert heard == []

        store.nowait.clear()
        await b.ask("two")
        assert store.nowait == []
        assert heard == [b.session]

        heard.clear()
        rt.hooks.on("session/flush", lambda _agent, session: heard.append(session))
        await a.ask("three")
        assert store.nowait == []
        assert heard == [a.session]
        assert store.statistics().buffered_events == 0


async def test_dispose_during_a_wrapper_flush_still_commits_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.49, R12.9: a dispose landing in the end-of-turn flush waits for it; nothing is lost or crashed."""
    inner = MemoryStore()
    store = HeldFlush(inner)
    restarts: list[object] = []
    async with runtime(_model(), store=store) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/restarted", lambda _agent, error: restarts.append(error), agent=agent)
        results: list[object] = []

        async def ask() -> None:
            results.append(await agent.ask("go"))

        nursery.start_soon(ask)
        await store.entered.wait()
        nursery.start_soon(agent.dispose)
        await trio.sleep(1)
        store.release.set()
    (result,) = results
    assert result.reason.kind == "completed"  # type: ignore[attr-defined]
    assert restarts == []
    assert inner.statistics().committed_events == len(agent.session.events)
    check_session_invariants(agent.session.events)


async def test_a_runtime_cancelled_during_the_flush_answers_the_ask_as_the_log_ends_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.44, R7.49: once ``turn/end`` is logged, a cancel from outside the runtime that lands in
    the end-of-turn flush does not change the turn's answer: ``ask`` gets the logged reason and
    the turn's text, not ``disposed`` with no text.
    """
    store = HeldFlush(MemoryStore())
    results: list[TurnResult] = []
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as scope:
                async with retinue.open_runtime(models=_model(), store=store) as rt:
                    agent = await rt.create_agent("a", OPTIONS)

                    async def ask() -> None:
                        results.append(await agent.ask("go"))

                    nursery.start_soon(ask)
                    await store.entered.wait()
                    scope.cancel()
                    await trio.sleep_forever()
    (result,) = results
    events = agent.session.events
    assert last_end_reason(events).kind == "completed"
    assert (result.turn, result.reason, result.text) == (1, last_end_reason(events), "answer")
    check_session_invariants(events)


async def test_dispose_waits_for_an_idle_injection_flush_in_flight(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.21, R12.9: the agent is quiescent before its teardown: a flush after an idle
    injection that is still running finishes before ``agent/disposed`` and before
    ``dispose()`` returns.
    """
    order: list[str] = []
    async with runtime(_model()) as rt:

        async def slow_flush(_agent: object, _session: Session) -> None:
            order.append("flush started")
            await trio.sleep(1)
            order.append("flush ended")

        rt.hooks.on("session/flush", slow_flush)
        rt.hooks.on("agent/disposed", lambda _agent: order.append("agent/disposed"))
        agent = await rt.create_agent("a", OPTIONS)
        agent.inject("some context")
        await trio.sleep(0.1)
        await agent.dispose()
        order.append("dispose returned")
    assert order == ["flush started", "flush ended", "agent/disposed", "dispose returned"]


class _HangingFlush(DelegatingStore):
    """A wrapper whose flush never returns, as a store stuck on a lost connection."""

    async def flush(self, session: Session) -> None:
        await trio.sleep_forever()


async def test_a_delegating_store_s_own_flush_is_bounded_by_the_flush_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.49, R12.9: a ``DelegatingStore`` subclass overriding ``flush`` is flushed as a durable
    store is, shielded and bounded by ``flush_timeout``, whatever the store it wraps says: a
    flush that hangs is reported after 5s, and ``dispose`` and the runtime's exit end, where the
    wrapped memory store's ``durable = False`` had the loop await it unbounded, for good."""
    store = _HangingFlush(MemoryStore())
    assert store.durable
    started = trio.current_time()
    async with runtime(_model(), store=store, flush_timeout=5) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported = _reported_errors(rt)
        assert (await agent.ask("one")).reason.kind == "completed"
        assert trio.current_time() - started == pytest.approx(5)
        assert [type(error) for error in reported] == [StoreTimeoutError]
        await agent.dispose()
        assert len(rt.agents) == 0
    assert trio.current_time() - started < 60


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "durable"])
async def test_a_run_of_failed_flushes_warns_of_its_first_its_tenth_and_its_end(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture, durable: bool
) -> None:
    """R7.49: every failed flush reaches ``agent/error``; the log warns of the first of a run,
    of the 10th (then the 100th, ...), and of the flush that ends it, as a store that is down
    fails every turn of every agent: the other failures are debug records. The agent's final
    flush, at its teardown, ends the last run."""
    backend, buffered = _failing_once()
    store = _CountingWrapper(buffered) if durable else buffered
    assert store.durable is durable
    caplog.set_level("WARNING", logger="retinue.loop")
    async with runtime(_model(), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported = _reported_errors(rt)
        for _ in range(12):
            backend.fail_next = True
            assert (await agent.ask("fails")).reason.kind == "completed"
        assert (await agent.ask("stored")).reason.kind == "completed"
        backend.fail_next = True
        assert (await agent.ask("fails again")).reason.kind == "completed"
    assert len(reported) == 13
    failed = f"flush of session {agent.id} failed"
    succeeded = f"flush of session {agent.id} succeeded again"
    expected = [
        f"{failed}: ",
        f"{failed} (10 failed flushes in a row): ",
        f"{succeeded} (failed before: 12)",
        f"{failed}: ",
        f"{succeeded} (failed before: 1)",  # the final flush, at the agent's teardown
    ]
    logged = [record.getMessage() for record in caplog.records]
    assert len(logged) == len(expected)
    assert all(message.startswith(start) for message, start in zip(logged, expected, strict=True))


async def test_a_flush_whose_store_and_listeners_both_fail_counts_once_and_warns_of_both(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R7.49, R4.23: the store's part and a ``session/flush`` listener failing in one flush
    are two ``agent/error``s and two warnings, and one failed flush of the run, which the next
    flush ends."""
    backend, buffered = _failing_once()
    caplog.set_level("WARNING", logger="retinue.loop")
    async with runtime(_model(), store=_CountingWrapper(buffered)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported = _reported_errors(rt)
        calls: list[int] = []

        def listener(_agent: object, _session: object) -> None:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("backup down")

        rt.hooks.on("session/flush", listener, agent=agent)
        backend.fail_next = True
        assert (await agent.ask("fails")).reason.kind == "completed"
        assert (await agent.ask("stored")).reason.kind == "completed"
    assert sorted(type(error).__name__ for error in reported) == ["RuntimeError", "StoreError"]
    logged = [record.getMessage() for record in caplog.records]
    assert len(logged) == 3
    assert all(
        message.startswith(f"flush of session {agent.id} failed: ") for message in logged[:2]
    )
    assert logged[2] == f"flush of session {agent.id} succeeded again (failed before: 1)"
