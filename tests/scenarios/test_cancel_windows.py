"""Cancel and dispose in the windows of R7.40 before a step opens (W1..W5; T-C2, T-C4..T-C6,
T-C8), and a send landing in a cancelled turn's flush.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import Block, Message, Text
from retinue.session import Event
from retinue.testing import Hang, Reply, ScriptedModel, check_session_invariants
from tests.helpers import (
    OPTIONS,
    Next,
    cancel_in_first_turn_on,
    idle_events,
    last_end_reason,
    of_type,
    record_statuses,
    runtime,
    texts,
    turn_ends,
    types,
    user_texts,
)


@attrs.define(eq=False)
class BeforeNextStep(trio.abc.Instrument):
    """Run *action* synchronously before the next step of any task but *owner*.

    Used right after ``send``: the owner does not checkpoint before parking,
    so the driver cannot have run yet and the action lands in window 1.
    """

    owner: trio.lowlevel.Task
    action: Callable[[], None]
    fired: bool = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if not self.fired and task is not self.owner:
            self.fired = True
            self.action()


async def test_w1_cancel_after_wake_settles_a_waiter_registered_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C2 / R7.4: a cancel between the wake-up and ``running`` drops the turn; an earlier waiter resolves."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        await trio.testing.wait_all_tasks_blocked()
        instrument = BeforeNextStep(
            trio.lowlevel.current_task(), lambda: agent.cancel("never mind")
        )
        trio.lowlevel.add_instrument(instrument)
        try:
            agent.send("doomed")
            await agent.wait_idle()
        finally:
            trio.lowlevel.remove_instrument(instrument)
        assert instrument.fired
        assert list(agent.session.events) == []
        assert statuses == []
        assert agent.status == "idle"
        assert model.statistics().calls == 0
        result = await agent.ask("next")
        assert result.reason.kind == "completed"
        assert result.turn == 1


async def test_w1_waiter_does_not_resolve_before_the_replacement_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C8 / R2.34, R7.4: a replacement queued after a window-1 cancel runs before the waiter resolves."""
    model = ScriptedModel([Reply("replaced")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await trio.testing.wait_all_tasks_blocked()

        def cancel_and_replace() -> None:
            agent.cancel()
            agent.send("replacement")

        instrument = BeforeNextStep(trio.lowlevel.current_task(), cancel_and_replace)
        trio.lowlevel.add_instrument(instrument)
        try:
            agent.send("doomed")
            await agent.wait_idle()
        finally:
            trio.lowlevel.remove_instrument(instrument)
        assert instrument.fired
        events = agent.session.events
        assert turn_ends(events) == ["completed"]
        assert user_texts(events) == ["replacement"]
        assert agent.status == "idle"


async def test_w2_cancel_from_running_listener_drops_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C8 / R7.5, R7.6: a ``running`` listener's cancel drops the turn; status flips back to idle; nothing logged."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses: list[str] = []

        def on_status(agent: retinue.Agent, status: str) -> None:
            statuses.append(status)
            if status == "running" and len(statuses) == 1:
                agent.cancel("not now")

        rt.hooks.on("agent/status", on_status, agent=agent)
        agent.send("doomed")
        await agent.wait_idle()
        assert statuses == ["running", "idle"]
        assert list(agent.session.events) == []
        assert model.statistics().calls == 0
        result = await agent.ask("next")
        assert result.reason.kind == "completed"
        assert result.turn == 1


async def test_w2_steer_after_a_cancel_from_running_listener_runs_as_a_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.10, R7.5, R7.8: a steer that follows the cancel (the status still says running) is
    new work: it starts its own turn instead of waiting, stranded, in the steering FIFO.
    """
    model = ScriptedModel([Reply("instead")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def on_status(agent: retinue.Agent, status: str) -> None:
            if status == "running" and not agent.session.events:
                agent.cancel("changed my mind")
                agent.steer("do this instead")

        rt.hooks.on("agent/status", on_status, agent=agent)
        agent.send("first")
        await agent.wait_idle()
        assert model.statistics().calls == 1
        assert of_type(agent.session.events, "steering/message") == []
        (prompt,) = of_type(agent.session.events, "user/message")
        assert prompt.data.content == (Text("do this instead"),)
        assert last_end_reason(agent.session.events).kind == "completed"


async def test_w2_waiter_does_not_resolve_before_the_replacement_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C8 / R2.34, R7.5: a ``running`` listener that cancels and re-sends keeps the waiter until it ran."""
    model = ScriptedModel([Reply("replaced", delay=5)])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses: list[str] = []

        def on_status(agent: retinue.Agent, status: str) -> None:
            statuses.append(status)
            if status == "running" and len(statuses) == 1:
                agent.cancel()
                agent.send("replacement")

        rt.hooks.on("agent/status", on_status, agent=agent)
        agent.send("doomed")
        events = await idle_events(agent)
        assert turn_ends(events) == ["completed"]
        assert user_texts(events) == ["replacement"]
        assert statuses == ["running", "idle"]
        assert model.statistics().calls == 1


async def test_w3_cancel_from_turn_start_observer_opens_no_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C6 / R7.17, R7.40 W3: a cancel from a ``turn/start`` observer ends the turn aborted with no step."""
    model = ScriptedModel([Reply("never"), Reply("later")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        cancel_in_first_turn_on(rt, agent, "turn/start", "observer said no")
        result = await agent.ask("doomed")
        events = agent.session.events
        assert result.reason.kind == "aborted"
        assert result.reason.reason == "observer said no"
        assert of_type(events, "step/start") == []
        assert types(events)[-1] == "turn/end"
        assert model.statistics().calls == 0
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_w3_cancel_from_turn_start_observer_interrupts_prompt_submit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.28, R7.40 W3, R7.41: a cancel from a ``turn/start`` observer already holds in
    prompt-submit: a listener waiting there is interrupted, and a batch it would have
    blocked ends ``aborted`` with the caller's reason, not ``rejected``.
    """
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        finished: list[bool] = []

        def on_event(_session: object, event: Event) -> None:
            if event.type == "turn/start":
                agent.cancel("observer said no")

        async def submit(
            _agent: retinue.Agent, _content: object, _source: object, _proceed: Next
        ) -> Block:
            await trio.sleep(10)
            finished.append(True)
            return Block("not this one")

        rt.hooks.on("session/event", on_event, agent=agent)
        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        result = await agent.ask("doomed")
        events = agent.session.events
        assert (result.reason.kind, result.reason.reason) == ("aborted", "observer said no")
        assert finished == []
        assert types(events) == ["turn/start", "turn/end"]
        assert model.statistics().calls == 0
        check_session_invariants(events)


@pytest.mark.parametrize("action", ["cancel", "dispose"])
async def test_w3_prompt_submit_abort_opens_no_step(
    autojump_clock: trio.testing.MockClock, action: str
) -> None:
    """T-X11 / R7.17, R7.41, R7.43: cancel/dispose during prompt-submit: no step, no model call; the signal fires."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)
        seen_signal: list[bool] = []

        async def submit(
            _agent: retinue.Agent, _content: object, _source: object, proceed: Next
        ) -> Any:
            if action == "cancel":
                agent.cancel("changed my mind")
            else:
                nursery.start_soon(agent.dispose)
            try:
                await trio.sleep_forever()
            finally:
                seen_signal.append(True)
            return await proceed()  # pragma: no cover

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        agent.send("doomed")
        events = await idle_events(agent)
        assert seen_signal == [True]
        assert of_type(events, "step/start") == []
        assert of_type(events, "assistant/chunk") == []
        assert model.statistics().calls == 0
        reason = last_end_reason(events)
        if action == "cancel":
            assert (reason.kind, reason.reason) == ("aborted", "changed my mind")
        else:
            assert reason.kind == "disposed"
        check_session_invariants(events)


@pytest.mark.parametrize("action", ["cancel", "dispose"])
async def test_w4_abort_during_prefix_composition_discards_it(
    autojump_clock: trio.testing.MockClock, action: str
) -> None:
    """T-C5 / R7.18 Check B: an abort while composing the prefix opens no step; the prefix is not cached."""
    model = ScriptedModel([Reply("answer")])
    async with runtime(model) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)
        compositions: list[bool] = []

        async def prefix(
            _agent: retinue.Agent, _seed: object, signal: object, proceed: Next
        ) -> Any:
            attempt = len(compositions) + 1
            if attempt == 1:
                if action == "cancel":
                    agent.cancel("stop composing")
                else:
                    nursery.start_soon(agent.dispose)
                    try:
                        await trio.sleep_forever()
                    finally:
                        compositions.append(bool(signal.cancel_called))  # type: ignore[attr-defined]
            compositions.append(bool(signal.cancel_called))  # type: ignore[attr-defined]
            mine = Message("user", (Text(f"prefix #{attempt}"),))
            return [mine, *await proceed()]  # type: ignore[misc]

        rt.hooks.on("agent/session-prefix", prefix, agent=agent)
        agent.send("doomed")
        events = await idle_events(agent)
        assert compositions == [True]
        assert of_type(events, "step/start") == []
        assert model.statistics().calls == 0
        if action == "dispose":
            assert last_end_reason(events).kind == "disposed"
            return
        assert last_end_reason(events).reason == "stop composing"
        result = await agent.ask("again")
        assert result.reason.kind == "completed"
        assert compositions == [True, False]
        assert texts(model.requests[0].messages[0].content) == "prefix #2"
        header = of_type(agent.session.events, "request/header")[0].data.header  # type: ignore[union-attr]
        assert [texts(m.content) for m in header.message_prefix] == ["prefix #2"]
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize("action", ["cancel", "dispose"])
async def test_w5_abort_in_pre_step_opens_no_step(
    autojump_clock: trio.testing.MockClock, action: str
) -> None:
    """T-X11 / R7.19 Check C, R7.41: an abort in pre-step opens no step and calls no model; the signal fires."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)
        signals: list[tuple[bool, str | None]] = []

        async def pre_step(
            _agent: retinue.Agent,
            _turn: int,
            _step: int,
            _system: str,
            _prefix: object,
            signal: object,
        ) -> None:
            if action == "cancel":
                agent.cancel("pre-step veto")
                signals.append((signal.cancel_called, signal.reason))  # type: ignore[attr-defined]
                return
            nursery.start_soon(agent.dispose)
            try:
                await trio.sleep_forever()
            finally:
                signals.append((signal.cancel_called, signal.reason))  # type: ignore[attr-defined]

        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        agent.send("doomed")
        events = await idle_events(agent)
        expected = "pre-step veto" if action == "cancel" else "disposed"
        assert signals == [(True, expected)]
        assert types(events) == ["turn/start", "user/message", "turn/end"]
        assert model.statistics().calls == 0
        reason = last_end_reason(events)
        assert reason.kind == ("aborted" if action == "cancel" else "disposed")
        check_session_invariants(events)


async def test_send_during_a_cancelled_turns_flush_runs_normally(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C4 / R7.8, R7.42, R2.27: the marker is reset per iteration; a send landing in the cancelled turn's flush runs."""
    model = ScriptedModel([Hang("x"), Reply("follow-up answer")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        flushes: list[str] = []

        def on_flush(agent: retinue.Agent, session: retinue.Session) -> None:
            last = of_type(session.events, "turn/end")[-1].data.reason.kind  # type: ignore[union-attr]
            flushes.append(last)
            if len(flushes) == 1:
                agent.send("follow-up")

        rt.hooks.on("session/flush", on_flush, agent=agent)
        agent.send("go")
        await trio.sleep(1)
        agent.cancel()
        await agent.wait_idle()
        assert flushes == ["aborted", "completed"]
        assert turn_ends(agent.session.events) == ["aborted", "completed"]
        assert user_texts(agent.session.events) == [
            "go",
            "follow-up",
        ]
        check_session_invariants(agent.session.events)
