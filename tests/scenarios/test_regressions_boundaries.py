"""Contract regressions at a turn's boundaries: a failed finish, observers of the step and turn
boundaries, the keys and sources of logged results, an abort during pre-step
(SPEC 7.7, 9; T-X8..T-X11).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from retinue import Accept, Message, Text, ToolResultBlock
from retinue.session import Event, Session, TurnEndReason
from retinue.testing import (
    CallTools,
    FinishAborted,
    FinishWithError,
    RawChunks,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import (
    OPTIONS,
    Next,
    echo,
    last_end_reason,
    of_type,
    runtime,
    turn_ends,
    types_without_chunks,
)
from tests.scenarios._regressions_kit import _results

# -- T-X8 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (
            FinishWithError("rate limited", "RATE_LIMIT"),
            TurnEndReason.error(1, "rate limited", "RATE_LIMIT"),
        ),
        (FinishWithError("no code"), TurnEndReason.error(1, "no code")),
        (FinishAborted(text="half"), TurnEndReason.error(1, "model stream aborted", "ABORTED")),
    ],
    ids=["error-with-code", "error-without-code", "aborted"],
)
async def test_finish_error_or_aborted_ends_the_turn_error(
    autojump_clock: trio.testing.MockClock, step: Any, reason: TurnEndReason
) -> None:
    """T-X8 / R7.36, R7.38, R4.12: finish ``error`` keeps (or omits) its code; finish ``aborted`` is ``ABORTED``."""
    model = ScriptedModel([step])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason == reason
        assert last_end_reason(agent.session.events) == reason
        line: Any = json.loads(json.dumps(agent.session.dump()[-1]))
        assert line["type"] == "turn/end"
        assert ("code" in line["data"]["reason"]) == (reason.code is not None)
        assert of_type(agent.session.events, "assistant/message") == []
        check_session_invariants(agent.session.events)


# -- T-X9 --------------------------------------------------------------------------------


async def test_step_start_is_in_the_log_when_its_observer_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X9 / R4.8, R7.20: append-before-notify: the observer sees ``step/start`` as the last logged event."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        seen: list[tuple[int, int]] = []

        def observer(session: Session, event: Event) -> None:
            if event.type == "step/start":
                seen.append((session.events[-1].seq, event.seq))
                assert session.events[-1] is event

        rt.hooks.on("session/event", observer, agent=agent)
        await agent.ask("go")
        assert len(seen) == 1
        assert seen[0][0] == seen[0][1]


@pytest.mark.parametrize("boundary", ["turn/start", "step/start", "step/end", "turn/end"])
async def test_raising_boundary_observer_keeps_the_log_balanced_and_the_driver_alive(
    autojump_clock: trio.testing.MockClock, boundary: str
) -> None:
    """T-X9 / R7.44-R7.48: a ``session/event`` observer raising on any boundary leaves a balanced log."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        armed = True

        def observer(_session: Session, event: Event) -> None:
            if armed and event.type == boundary:
                raise RuntimeError(f"{boundary} observer failed")

        rt.hooks.on("session/event", observer, agent=agent)
        first = await agent.ask("go")
        armed = False
        second = await agent.ask("again")
        events = agent.session.events
        check_session_invariants(events)
        assert second.reason.kind == "completed"
        assert turn_ends(events)[1] == "completed"
        if boundary == "turn/end":
            assert first.reason.kind == "completed"
        else:
            assert first.reason.kind == "error"
            assert first.reason.message == f"{boundary} observer failed"
            assert first.reason.step == (0 if boundary == "turn/start" else 1)
        if boundary == "turn/start":
            assert types_without_chunks(events)[:2] == ["turn/start", "turn/end"]


async def test_raising_agent_error_listener_is_contained(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X9 / R7.45: a raising ``agent/error`` listener changes nothing; the log stays balanced."""
    model = ScriptedModel([FinishWithError("bad", "BAD"), Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        heard: list[str] = []

        def listener(_agent: object, _turn: int, _step: int, error: BaseException) -> None:
            heard.append(str(error))
            raise RuntimeError("agent/error listener failed")

        rt.hooks.on("agent/error", listener, agent=agent)
        first = await agent.ask("go")
        assert first.reason == TurnEndReason.error(1, "bad", "BAD")
        assert heard == ["bad"]
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_pre_step_listener_that_disposes_then_raises_ends_disposed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X9 / R7.47: disposal observed in the outer handler wins over the listener's later raise."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)

        async def dispose_then_raise(*_args: object) -> None:
            nursery.start_soon(agent.dispose)
            with trio.CancelScope(shield=True):
                await trio.testing.wait_all_tasks_blocked()
            assert agent.status == "disposed"
            raise RuntimeError("after dispose")

        rt.hooks.on("agent/pre-step", dispose_then_raise, agent=agent)
        result = await agent.ask("go")
        assert result.reason == TurnEndReason.disposed()
        assert types_without_chunks(agent.session.events) == [
            "turn/start",
            "user/message",
            "turn/end",
        ]
        assert model.requests == []


# -- T-X10 -------------------------------------------------------------------------------


async def test_tool_result_is_keyed_by_the_model_call_id_after_post_execute(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X10 / R9.5: ``tool/result`` carries the model's call id even when post-execute replaces the content."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}', id="model-id-1")]), Reply("ok")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def replace(_execution: object, _result: object, _next: Next) -> Accept:
            await trio.lowlevel.checkpoint()
            return Accept(content="replaced")

        rt.hooks.on("tools/post-execute", replace, agent=agent)
        await agent.ask("go")
        (result,) = _results(agent.session.events)
        assert result.call_id == "model-id-1"
        assert result.content == (Text("replaced"),)
        block = model.requests[1].messages[-1].content[0]
        assert block == ToolResultBlock("model-id-1", (Text("replaced"),), False)
        call_seq = of_type(agent.session.events, "tool/call")[0].seq
        assert of_type(agent.session.events, "tool/result")[0].source_event_seqs == (call_seq,)


async def test_assistant_message_without_streamed_chunks_has_no_source_seqs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X10 / R7.36: with no chunk streamed, ``assistant/message`` omits ``source_event_seqs``."""
    model = ScriptedModel([RawChunks([])])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def synthesize(
            _agent: object, _turn: int, _step: int, message: Message, _next: Next
        ) -> Message:
            assert message.content == ()
            return Message("assistant", (Text("synthesized"),))

        rt.hooks.on("agent/step-result", synthesize, agent=agent)
        result = await agent.ask("go")
        assert result.text == "synthesized"
        message = of_type(agent.session.events, "assistant/message")[0]
        assert message.source_event_seqs is None
        assert "source_event_seqs" not in agent.session.dump()[message.seq]
        assert of_type(agent.session.events, "assistant/chunk") == []


# -- T-X11 -------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["cancel", "dispose"])
async def test_abort_during_an_abort_aware_pre_step_starts_no_step(
    autojump_clock: trio.testing.MockClock, action: str
) -> None:
    """T-X11 / R7.19, R7.41, R7.43: the pre-step signal fires; no step, no LLM call, no chunk; right reason."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        observed: list[tuple[bool, str | None]] = []

        async def waits(
            _agent: object, _turn: int, _step: int, _system: str, _prefix: object, signal: Any
        ) -> None:
            try:
                await trio.sleep_forever()
            finally:
                observed.append((signal.cancel_called, signal.reason))

        rt.hooks.on("agent/pre-step", waits, agent=agent)
        agent.send("go")
        await trio.sleep(5)
        assert agent.status == "running"
        if action == "cancel":
            agent.cancel("user changed their mind")
            await agent.wait_idle()
            expected = TurnEndReason.aborted("user changed their mind")
        else:
            await agent.dispose()
            expected = TurnEndReason.disposed()
        events = agent.session.events
        assert last_end_reason(events) == expected
        assert observed == [(True, "user changed their mind" if action == "cancel" else "disposed")]
        assert types_without_chunks(events) == ["turn/start", "user/message", "turn/end"]
        assert model.requests == []
        assert of_type(events, "assistant/chunk") == []
