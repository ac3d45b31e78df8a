"""What a driver crash tells the askers of its batch and the agent's listeners, and when:
the answer the log gives, once the turn is flushed (DESIGN 4; SPEC R7.2, R7.45, R7.49).

A driver crash is a bug in retinue itself, so these tests monkeypatch a private
function of the turn's own bookkeeping to raise, and say which one.
"""

from __future__ import annotations

import gc
import logging
import weakref
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.hooks import Allow, Block
from retinue.loop import _core, _driver, _state
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    FinishWithError,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import (
    DEADLINE,
    OPTIONS,
    Next,
    last_end_reason,
    nap,
    runtime,
    texts,
    turn_ends,
    user_texts,
)
from tests.scenarios._supervisor_kit import (
    DriverBugError,
    SlowFlushStore,
    crash_in_the_post_turn_flush,
    record,
)


def crash_in_the_error_handling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``TurnState.record_error`` raise: a failing step crashes the driver."""

    def broken(self: _state.TurnState, error: BaseException) -> None:
        raise DriverBugError("record_error bug")

    monkeypatch.setattr(_state.TurnState, "record_error", broken)


async def test_a_crash_after_the_turn_ended_answers_with_the_logged_end(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R7.44: a crash raised once ``turn/end`` is logged (here, in the post-turn flush)
    leaves the turn as the log closed it, and the ask gets that end, with the turn's text, not an
    ``error``/``DRIVER_CRASH`` the log never said."""
    crashes = crash_in_the_post_turn_flush(monkeypatch)
    async with runtime(ScriptedModel([Reply("one"), Reply("two")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        restarts = record(rt, agent, "agent/restarted")
        result = await agent.ask("go")
        assert (crashes, len(restarts)) == ([1], 1)
        assert turn_ends(agent.session.events) == ["completed"]
        assert (result.turn, result.reason, result.text) == (
            1,
            last_end_reason(agent.session.events),
            "one",
        )
        assert result.error is None
        assert (await agent.ask("again")).text == "two"
        check_session_invariants(agent.session.events)


async def test_a_crash_after_the_turn_ended_answers_a_blocked_prompt_with_its_block(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4, R7.11: in a batch whose post-turn flush crashed, a prompt a listener blocked
    is answered ``rejected`` with its block's reason, as the log's ``prompt/blocked`` says,
    and the other with the turn's logged end."""
    crash_in_the_post_turn_flush(monkeypatch)
    async with runtime(ScriptedModel([Reply("one")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def submit(
            _agent: retinue.Agent, content: Any, _source: object, _proceed: Next
        ) -> Block | Allow:
            return Block("secret") if "password" in texts(content) else Allow()

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        answers: dict[str, retinue.TurnResult] = {}

        async def ask(prompt: str) -> None:
            answers[prompt] = await agent.ask(prompt)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "the password")
            nursery.start_soon(ask, "hello")
        assert turn_ends(agent.session.events) == ["completed"]
        blocked, allowed = answers["the password"], answers["hello"]
        assert (blocked.turn, blocked.reason.kind, blocked.reason.reason) == (
            1,
            "rejected",
            "secret",
        )
        assert (allowed.turn, allowed.reason.kind, allowed.text) == (1, "completed", "one")


@pytest.mark.parametrize("where", ["turn", "post-turn-flush"])
async def test_an_agent_a_crash_left_with_nothing_queued_goes_idle_once_the_turn_is_flushed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """R7.2, DESIGN 4: after a driver crash the agent's ``agent/status`` goes ``idle`` once the
    turn's closing events are committed, as after a turn's own flush, not as the supervisor closes
    the turn, before the flush, when a listener reading the store would find the turn unwritten.

    Breaks ``TurnState.record_error`` (a failing step's handling), or the post-turn flush.
    """
    store = SlowFlushStore()
    if where == "turn":
        crash_in_the_error_handling(monkeypatch)
        model = ScriptedModel([FinishWithError("boom")])
    else:
        crash_in_the_post_turn_flush(monkeypatch)
        model = ScriptedModel([Reply("one")])
    async with runtime(model, store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        unwritten: list[tuple[str, int]] = []

        def on_status(_agent: object, status: str) -> None:
            committed = store.store.statistics().committed_events
            unwritten.append((status, len(agent.session.events) - committed))

        rt.hooks.on("agent/status", on_status, agent=agent)
        await agent.ask("go")
        await agent.wait_idle()
        assert unwritten == [("running", 0), ("idle", 0)]


async def test_a_steer_sent_while_a_crashed_turn_is_flushed_starts_the_next_turn(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R3.10, R7.8, DESIGN 4: while the supervisor waits for a crashed turn's flush the
    agent still reads ``running``, as during a turn's own flush: a steer sent then is the
    restarted driver's next prompt, and a cancel sent before it ends nothing of that turn.

    Breaks ``TurnState.record_error``; the store's flush takes 5 virtual seconds.
    """
    crash_in_the_error_handling(monkeypatch)
    model = ScriptedModel([FinishWithError("boom"), Reply("later on")])
    async with runtime(model, store=SlowFlushStore()) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        assert agent.status == "running"
        agent.cancel("never mind")
        agent.steer("later")
        await trio.sleep(10)
        await agent.wait_idle()
        assert turn_ends(agent.session.events) == ["error", "completed"]
        assert user_texts(agent.session.events) == ["go", "later"]
        check_session_invariants(agent.session.events)


async def test_a_crashed_turn_ends_naming_the_step_it_was_in(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R4.12, R7.45, DESIGN 4: the ``error`` end a driver crash logs names the step the turn was in,
    as a turn's own error does, and so do its ``agent/error`` and the ask's answer, not step 0
    whatever step the turn had reached.

    Breaks ``TurnState.record_error``; the second step's model call fails.
    """
    crash_in_the_error_handling(monkeypatch)
    model = ScriptedModel(
        [CallTools([ToolCallSpec("nap", '{"seconds": 1}', id="c1")]), FinishWithError("boom")]
    )
    async with runtime(model, tools=[nap]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        result = await agent.ask("go")
        reason = last_end_reason(agent.session.events)
        assert (reason.code, reason.step) == ("DRIVER_CRASH", 2)
        assert result.reason == reason
        assert [(turn, step, type(error)) for turn, step, error in errors] == [
            (1, 2, DriverBugError)
        ]


async def test_a_crash_readying_a_turn_leaves_its_prompts_queued_for_the_restarted_driver(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.7, DESIGN 4: a crash as the driver readies a turn's bookkeeping leaves the batch queued,
    and the restarted driver serves it: the prompts are not drained first and lost, their ask never
    answered.

    Breaks the driver's ``TurnState`` once.
    """
    real = _state.TurnState
    crashes: list[int] = []

    def broken(core: _core.AgentCore, turn: int) -> _state.TurnState:
        if not crashes:
            crashes.append(1)
            raise DriverBugError("TurnState bug")
        return real(core, turn)

    monkeypatch.setattr(_driver, "TurnState", broken)
    async with runtime(ScriptedModel([Reply("served")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        restarts = record(rt, agent, "agent/restarted")
        result = await agent.ask("go")
        assert (crashes, len(restarts)) == ([1], 1)
        assert (result.turn, result.reason.kind, result.text) == (1, "completed", "served")
        check_session_invariants(agent.session.events)


async def _asked_as_the_runtime_is_cancelled(
    model: ScriptedModel, store: SlowFlushStore
) -> tuple[str | None, int, int]:
    """Ask an agent over *model* and *store*, cancelling its runtime a virtual second in;
    the answer's code, and how many events were committed and logged as it came."""
    answered: list[tuple[str | None, int, int]] = []
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as outer:
            with trio.move_on_after(1):
                async with retinue.open_runtime(models=model, tools=[nap], store=store) as rt:
                    agent = await rt.create_agent("a", OPTIONS)

                    async def ask() -> None:
                        result = await agent.ask("go")
                        events = len(agent.session.events)
                        answered.append((result.reason.code, store.committed(), events))

                    outer.start_soon(ask)
                    await trio.sleep(100)
    [answer] = answered
    return answer


async def test_the_runtimes_cancel_answers_a_crashed_batch_once_its_turn_is_flushed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.49, R12.10, DESIGN 4: cancelled with its runtime while the supervisor waits for a crashed
    turn's flush, the ask is still answered once the turn is committed, as a turn's own close
    answers after its shielded flush, not at once with the turn unwritten.

    Breaks ``TurnState.record_error``; the store's flush takes 5 virtual seconds.
    """
    crash_in_the_error_handling(monkeypatch)
    store = SlowFlushStore()
    model = ScriptedModel([FinishWithError("boom")])
    code, committed, events = await _asked_as_the_runtime_is_cancelled(model, store)
    assert (code, committed) == ("DRIVER_CRASH", events)


async def test_a_crash_closing_a_turn_the_runtimes_cancel_cut_short_is_answered_once_flushed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.49, R12.10, DESIGN 4: the runtime's cancel reaching the idle flusher and a turn whose
    close then crashes: the supervisor flushes the closed turn itself, shielded and bounded, and
    answers the ask once it is committed; with no flusher left, the ask is not answered at once with
    the turn never written.

    Breaks ``TurnState.answer_dangling_calls``, which closing the cancelled step calls; the store's
    flush takes 5 virtual seconds.
    """

    def broken(self: _state.TurnState, code: str, text: str) -> None:
        raise RuntimeError("answer_dangling_calls bug")

    monkeypatch.setattr(_state.TurnState, "answer_dangling_calls", broken)
    store = SlowFlushStore()
    model = ScriptedModel([CallTools([ToolCallSpec("nap", '{"seconds": 100}', id="c1")])])
    code, committed, events = await _asked_as_the_runtime_is_cancelled(model, store)
    assert (code, committed) == ("DRIVER_CRASH", events)


class _CountingSlowStore(DelegatingStore):
    """A durable memory store whose flush takes 1.5 virtual seconds, counting how many run
    at once."""

    durable = True

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.running = self.most_at_once = 0

    async def flush(self, session: Session) -> None:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await trio.sleep(1.5)
            await self.store.flush(session)
        finally:
            self.running -= 1


async def test_a_crashed_turn_whose_flush_outlasts_the_bound_is_flushed_once(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.49, DESIGN 4: a crashed turn whose flush waits past ``flush_timeout`` behind a round in
    flight is flushed by the flusher alone, its ask answered at the bound, not flushed a second time
    by the supervisor beside the flusher and answered at twice it.

    Breaks ``TurnState.record_error``; the store's flush takes 1.5 virtual seconds.
    """
    crash_in_the_error_handling(monkeypatch)
    store = _CountingSlowStore()
    model = ScriptedModel([FinishWithError("down")])
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model, store=store, flush_timeout=2.0) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            agent.inject("note")  # a round in flight: the flusher flushes it from t=0
            await trio.sleep(1)
            began = trio.current_time()
            result = await agent.ask("go")
            waited = trio.current_time() - began
            await trio.sleep(10)
    assert result.reason.code == "DRIVER_CRASH"
    assert waited == 2.0
    assert store.most_at_once == 1


async def test_a_runtime_ended_after_a_crash_leaves_no_stack_on_its_agents(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """DESIGN 4: what the driver and the flusher unwound as the runtime ended (kept on the agent for
    a crash in their unwinding to raise again) is let go once supervision ends, so a kept agent
    handle holds neither task's last stack."""
    model = ScriptedModel([CallTools([ToolCallSpec("nap", '{"seconds": 100}', id="c1")])])
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as outer:
            with trio.move_on_after(1):
                async with retinue.open_runtime(models=model, tools=[nap]) as rt:
                    agent = await rt.create_agent("a", OPTIONS)
                    outer.start_soon(agent.ask, "go")
                    await trio.sleep(100)
    core = agent._core
    assert (core.driver_interruption, core.flusher_interruption) == (None, None)


async def test_a_crash_closing_a_failed_turn_names_the_turn_s_first_error_in_its_end(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.45, DESIGN 4: a turn whose model failed, then whose close crashed the driver, ends
    ``DRIVER_CRASH`` in the log and in the ask's answer, the message naming the model's
    error the turn had recorded first; both are reported on ``agent/error``, in that
    order, and the agent is restarted.

    Breaks ``TurnState.close_turn`` for a turn ending ``error``.
    """
    close_turn = _state.TurnState.close_turn

    def broken(self: _state.TurnState) -> None:
        if self.reason.kind == "error":
            raise DriverBugError("close_turn bug")
        close_turn(self)

    monkeypatch.setattr(_state.TurnState, "close_turn", broken)
    model = ScriptedModel([FinishWithError("model down", code="X"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors = record(rt, agent, "agent/error")
        restarts = record(rt, agent, "agent/restarted")
        result = await agent.ask("go")
        reason = last_end_reason(agent.session.events)
        assert (reason.kind, reason.code, reason.step) == ("error", "DRIVER_CRASH", 1)
        assert reason.message == (
            "driver crashed: close_turn bug; the turn had failed first: model down (X)"
        )
        assert result.reason == reason
        assert isinstance(result.error, DriverBugError)
        assert [type(error) for _turn, _step, error in errors] == [
            retinue.ModelError,
            DriverBugError,
        ]
        assert len(restarts) == 1
        assert (await agent.ask("again")).text == "two"
        check_session_invariants(agent.session.events)


async def test_a_restarted_driver_lets_the_crash_before_it_go(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4: once the driver is restarted, nothing of the runtime's holds the crash
    (whose traceback holds the crashed turn's frames and its failure) while the agent runs
    on: a collection frees it.

    Breaks ``TurnState.close_turn`` once.
    """
    close_turn = _state.TurnState.close_turn
    armed = [True]

    def broken(self: _state.TurnState) -> None:
        if armed[0]:
            armed[0] = False
            raise DriverBugError("close_turn bug")
        close_turn(self)

    monkeypatch.setattr(_state.TurnState, "close_turn", broken)
    # The crash's log record holds it too: kept from pytest's capture, which keeps records.
    logger = logging.getLogger("retinue.supervisors")
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "handlers", [logging.NullHandler()])
    crashes: list[weakref.ref[BaseException]] = []
    async with runtime(ScriptedModel([Reply("one"), Reply("two")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on(
            "agent/error",
            lambda _agent, _turn, _step, error: crashes.append(weakref.ref(error)),
            agent=agent,
        )
        await agent.ask("go")
        assert (await agent.ask("again")).text == "two"
        gc.collect()
        assert len(crashes) == 1
        assert crashes[0]() is None, "the crash is still held"
