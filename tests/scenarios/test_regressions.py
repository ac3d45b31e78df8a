"""Contract regressions and edges (SPEC 7.7, 9; T-X1..T-X4, T-X8..T-X11 and the coverage edges)."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import (
    Accept,
    Message,
    MessageSource,
    Stop,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue.providers import Usage
from retinue.session import (
    AssistantMessage,
    Event,
    Session,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
)
from retinue.testing import (
    CallTools,
    FinishAborted,
    FinishWithError,
    Hang,
    RawChunks,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from retinue.tools import ToolContext
from tests.helpers import (
    OPTIONS,
    Next,
    echo,
    idle_events,
    last_end_reason,
    of_type,
    runtime,
    texts,
    turn_ends,
    types_without_chunks,
    user_texts,
)


@retinue.tool
async def ping() -> str:
    """Answer pong; takes no arguments."""
    await trio.lowlevel.checkpoint()
    return "pong"


def _results(events: Any) -> list[ToolResultEvent]:
    return [e.data for e in of_type(events, "tool/result") if isinstance(e.data, ToolResultEvent)]


# -- T-X1 --------------------------------------------------------------------------------


async def test_step_result_with_invalid_content_ends_the_turn_without_orphan_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36, R7.45, R4.15: a rewrite whose content is not all blocks is an invalid hook result.

    Nothing of it is logged, so no tool call is registered and no synthetic
    result answers a call that no assistant message carries.
    """
    model = ScriptedModel([Reply("hello")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        broken = Message("assistant", (ToolCall("c1", "echo", "{}"), "not a block"))  # type: ignore[arg-type]

        async def rewrite(*_args: object) -> Message:
            return broken

        rt.hooks.on("agent/step-result", rewrite, agent=agent)
        result = await agent.ask("go")
        events = agent.session.events
        assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
        assert of_type(events, "assistant/message") == []
        assert of_type(events, "tool/call") == of_type(events, "tool/result") == []
        assert [m.role for m in agent.session.derive_messages()] == ["user"]
        check_session_invariants(events)


@pytest.mark.parametrize("role", ["user", "system"])
async def test_step_result_rewrite_with_another_role_is_an_invalid_hook_result(
    autojump_clock: trio.testing.MockClock, role: str
) -> None:
    """R7.36, R6.3: the step's message is the assistant's: a rewrite given another role
    is refused, not logged as the assistant's with its role silently dropped."""
    model = ScriptedModel([Reply("hello")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def rewrite(*_args: object) -> Message:
            return Message(role, (Text("spoken for the user"),))  # type: ignore[arg-type]

        unregister = rt.hooks.on("agent/step-result", rewrite, agent=agent)
        result = await agent.ask("go")
        assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
        assert f"{role} message" in (result.reason.message or "")
        assert of_type(agent.session.events, "assistant/message") == []
        unregister()
        assert (await agent.ask("again")).text == "hello"
        check_session_invariants(agent.session.events)


async def test_step_result_rewrite_is_what_log_history_and_tools_see(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X1 / R7.36: the ``agent/step-result`` rewrite is logged, derived and dispatched; the raw one is not."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "original"}', id="c1")]), Reply("done")]
    )
    async with runtime(model, tools=[echo, ping]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rewritten = Message(
            "assistant",
            (
                Text("let me check"),
                ToolCall("c1", "echo", '{"text": "rewritten"}'),
                ToolCall("c9", "ping", ""),
            ),
        )

        async def rewrite(
            _agent: object, turn: int, step: int, message: Message, next_: Next
        ) -> Message:
            original = await next_()
            return rewritten if (turn, step) == (1, 1) else original

        rt.hooks.on("agent/step-result", rewrite, agent=agent)
        await agent.ask("go")
        events = agent.session.events
        logged = of_type(events, "assistant/message")[0].data
        assert isinstance(logged, AssistantMessage)
        assert logged.content == rewritten.content
        calls = [e.data for e in of_type(events, "tool/call") if isinstance(e.data, ToolCallEvent)]
        assert [(c.call_id, c.name, c.arguments) for c in calls] == [
            ("c1", "echo", '{"text": "rewritten"}'),
            ("c9", "ping", ""),
        ]
        assert [r.content for r in _results(events)] == [
            (Text("echo: rewritten"),),
            (Text("pong"),),
        ]
        history = list(agent.session.derive_messages())
        assert history[1] == rewritten
        assert model.requests[1].messages[1] == rewritten
        assert "original" not in repr(model.requests[1].messages)


# -- T-X2 --------------------------------------------------------------------------------


async def test_abort_inside_a_tool_prevents_the_remaining_tools_and_the_next_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X2 / R9.20, R9.21: a tool cancelling its agent stops later calls and the next model request."""
    ran: list[str] = []

    @retinue.tool
    async def stopper(ctx: ToolContext) -> str:
        """Cancel the calling agent, then keep working."""
        ran.append("stopper")
        ctx.agent.cancel("tool pulled the plug")
        await trio.sleep(10)
        ran.append("stopper finished")
        return "unreachable"

    @retinue.tool
    async def after() -> str:
        """Must never run."""
        ran.append("after")
        await trio.lowlevel.checkpoint()
        return "ran"

    model = ScriptedModel(
        [
            CallTools(
                [ToolCallSpec("stopper", "{}", id="c1"), ToolCallSpec("after", "{}", id="c2")]
            ),
            Reply("never"),
        ]
    )
    async with runtime(model, tools=[stopper, after]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason == TurnEndReason.aborted("tool pulled the plug")
        assert ran == ["stopper"]
        assert model.statistics().calls == 1
        errors = {r.call_id: r.error for r in _results(agent.session.events)}
        assert errors["c1"] is not None
        assert errors["c1"].code == "ABORTED"
        assert errors["c2"] is not None
        assert errors["c2"].code == "ABORTED_BEFORE_DISPATCH"
        check_session_invariants(agent.session.events)


# -- T-X3 --------------------------------------------------------------------------------


async def test_a_raising_observer_loses_no_steering_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.5, R4.8, R7.46: every drained steering message is logged even if an observer raises on one."""
    model = ScriptedModel([Reply("first", delay=5), Reply("second")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def fail_on_steering(_session: object, event: Event) -> None:
            if event.type == "steering/message":
                raise RuntimeError("observer failed")

        rt.hooks.on("session/event", fail_on_steering, agent=agent)
        agent.send("go")
        await trio.sleep(1)
        agent.steer("one")
        agent.steer("two")
        events = await idle_events(agent)
        steered = [e.data for e in of_type(events, "steering/message")]
        assert [texts(data.content) for data in steered] == ["one", "two"]  # type: ignore[union-attr]
        assert last_end_reason(events).kind == "error"
        check_session_invariants(events)


async def test_steering_from_continuation_listener_overrides_stop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X3 / R7.28: a steer from a continuation listener that returns ``Stop`` still runs the next step."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        calls = 0

        def late_steer(handle: Any, _turn: int, _default: object, _next: Next) -> Stop:
            nonlocal calls
            calls += 1
            if calls == 1:
                handle.steer("one more thing")
            return Stop()

        rt.hooks.on("agent/turn-continuation", late_steer, agent=agent)
        result = await agent.ask("go")
        assert result.text == "two"
        assert len(of_type(agent.session.events, "turn/start")) == 1
        assert len(of_type(agent.session.events, "step/start")) == 2
        assert len(of_type(agent.session.events, "steering/message")) == 1


async def test_steering_from_step_end_observer_runs_a_next_step_in_the_same_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X3 / R7.28: a steer from a ``step/end`` observer continues the turn with another step."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        steered = False

        def observer(_session: Session, event: Event) -> None:
            nonlocal steered
            if event.type == "step/end" and not steered:
                steered = True
                agent.steer("after step one")

        rt.hooks.on("session/event", observer, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        kinds = types_without_chunks(agent.session.events)
        assert kinds.count("turn/start") == 1
        assert kinds.count("step/start") == 2
        first_end = kinds.index("step/end")
        assert kinds[first_end + 1 : first_end + 3] == ["steering/message", "step/start"]


async def test_steering_from_turn_end_observer_becomes_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X3 / R3.10: a steer arriving from a ``turn/end`` observer starts the next turn as a prompt."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        steered = False

        def observer(_session: Session, event: Event) -> None:
            nonlocal steered
            if event.type == "turn/end" and not steered:
                steered = True
                agent.steer("too late for turn one")

        rt.hooks.on("session/event", observer, agent=agent)
        agent.send("go")
        events = await idle_events(agent)
        assert turn_ends(events) == ["completed", "completed"]
        assert user_texts(events) == ["go", "too late for turn one"]
        assert of_type(events, "steering/message") == []


async def test_steering_queued_during_a_failed_step_is_redelivered_as_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X3 / R3.12, R3.10: steering that arrived in a step which then failed becomes the next turn's prompt."""
    model = ScriptedModel(
        [FinishWithError("overloaded", "OVERLOADED", delay=5), Reply("recovered")]
    )
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        agent.steer("are you there?")
        events = await idle_events(agent)
        assert turn_ends(events) == ["error", "completed"]
        assert user_texts(events) == ["go", "are you there?"]
        assert of_type(events, "steering/message") == []


# -- T-X4 --------------------------------------------------------------------------------


async def test_raising_continuation_listener_fails_the_turn_and_the_driver_survives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X4 / R7.26, R7.48: a raising continuation listener ends the turn ``error`` after a closed step."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        armed = True

        def explode(_agent: object, _turn: int, _default: object, next_: Next) -> Awaitable[Any]:
            if armed:
                raise RuntimeError("continuation exploded")
            return next_()

        rt.hooks.on("agent/turn-continuation", explode, agent=agent)
        first = await agent.ask("go")
        assert first.reason == TurnEndReason.error(1, "continuation exploded")
        assert types_without_chunks(agent.session.events)[-2:] == ["step/end", "turn/end"]
        armed = False
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_rejecting_flush_is_reported_and_the_agent_survives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X4 / R7.49: a failing flush is reported on ``agent/error`` only; nothing is logged after ``turn/end``."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        failure = OSError("disk full")
        armed = True
        reported: list[tuple[int, int, BaseException]] = []

        async def flush(_agent: object, _session: Session) -> None:
            await trio.lowlevel.checkpoint()
            if armed:
                raise failure

        rt.hooks.on("session/flush", flush, agent=agent)
        rt.hooks.on(
            "agent/error",
            lambda _a, turn, step, error: reported.append((turn, step, error)),
            agent=agent,
        )
        first = await agent.ask("go")
        assert first.reason.kind == "completed"
        assert reported == [(1, 1, failure)]
        assert agent.session.events[-1].type == "turn/end"
        armed = False
        assert (await agent.ask("again")).reason.kind == "completed"
        assert len(reported) == 1


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


# -- Edges -------------------------------------------------------------------------------


async def test_turn_start_rejected_before_logging_reaches_the_backstop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Edges / R7.7: a ``turn/start`` refused by the log (a foreign writer left a turn open) hits the backstop.

    With typed events a trigger source cannot be non-JSON, so the honest way to
    make the driver's own ``turn/start`` append fail before logging is a turn
    already open in the log: the append raises ``TURN_OVERLAP``, nothing is
    appended, ``agent/error`` reports step 0 and the driver keeps serving.
    """
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported: list[tuple[int, int, BaseException]] = []
        rt.hooks.on(
            "agent/error",
            lambda _a, turn, step, error: reported.append((turn, step, error)),
            agent=agent,
        )
        agent.session.append(
            TurnStart(1, TurnTrigger("message", MessageSource("plugin", "foreign")))
        )
        before = len(agent.session.events)
        lost = await agent.ask("lost prompt")
        assert len(agent.session.events) == before
        assert (lost.turn, lost.reason.kind) == (0, "error")  # no turn was logged for it
        assert lost.reason.step == 0
        assert len(reported) == 1
        turn, step, error = reported[0]
        assert (turn, step) == (2, 0)
        assert getattr(error, "code", None) == "TURN_OVERLAP"
        assert lost.reason.code == "TURN_NOT_OPENED"
        assert lost.error is error  # the exception the log could not keep (none was logged)
        assert agent.status == "idle"
        assert model.requests == []
        agent.session.append(TurnEnd(1, TurnEndReason.completed()))
        ok = await agent.ask("works again")
        assert (ok.turn, ok.reason.kind) == (2, "completed")
        assert user_texts(agent.session.events) == ["works again"]
        check_session_invariants(agent.session.events)


async def test_empty_and_non_json_tool_arguments(autojump_clock: trio.testing.MockClock) -> None:
    """Edges / R9.6: empty arguments mean ``{}``; invalid JSON reaches validation raw and is reported, not crashed on."""
    model = ScriptedModel(
        [
            CallTools(
                [ToolCallSpec("ping", "", id="c1"), ToolCallSpec("echo", '{"text": ', id="c2")]
            ),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[echo, ping]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        events = agent.session.events
        calls = [e.data for e in of_type(events, "tool/call") if isinstance(e.data, ToolCallEvent)]
        assert [c.arguments for c in calls] == ["", '{"text": ']
        first, second = _results(events)
        assert (first.content, first.is_error) == ((Text("pong"),), False)
        assert second.is_error
        assert second.error == ToolErrorInfo("ToolError", "INVALID_ARGUMENTS")
        assert model.statistics().calls == 2
        check_session_invariants(events)


async def test_a_json_string_as_arguments_is_not_called_invalid_json(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.6: arguments that are valid JSON but not an object are reported as such; only
    text that does not parse is reported as invalid JSON."""
    model = ScriptedModel(
        [
            CallTools(
                [
                    ToolCallSpec("echo", '"hello"', id="c1"),
                    ToolCallSpec("echo", "hello", id="c2"),
                ]
            ),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("go")
        quoted, bare = _results(agent.session.events)
        assert quoted.content == (
            Text(
                'Error: invalid arguments for tool "echo": arguments: expected object, got string'
            ),
        )
        assert bare.content == (
            Text("Error: invalid arguments for tool \"echo\": arguments: not valid JSON: 'hello'"),
        )


@retinue.tool(parallel_safe=True)
async def _nap(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: How long.
    """
    await trio.sleep(seconds)
    return f"slept {seconds:g}"


@pytest.mark.parametrize("foreign_listener", [False, True])
async def test_another_agents_post_execute_listener_does_not_cancel_a_settled_result(
    autojump_clock: trio.testing.MockClock, foreign_listener: bool
) -> None:
    """R6.5 / R9.20: a step aborted while one call runs keeps the result of a call that
    settled, whether or not some other agent has a scoped post-execute listener."""
    model = ScriptedModel(
        [
            CallTools(
                [
                    ToolCallSpec("_nap", '{"seconds": 10}', id="slow"),
                    ToolCallSpec("_nap", '{"seconds": 1}', id="fast"),
                ]
            ),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[_nap]) as rt:
        other = await rt.create_agent("other", OPTIONS)
        if foreign_listener:

            async def passthrough(*args: Any) -> Any:
                return await args[-1]()

            rt.hooks.on("tools/post-execute", passthrough, agent=other)
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(5)
        agent.cancel("stop")
        await agent.wait_idle()
        slow, fast = _results(agent.session.events)
        assert slow.is_error
        assert (fast.content, fast.is_error) == ((Text("slept 1"),), False)


@retinue.tool
async def _count(n: int) -> str:
    """Count, exclusively.

    Args:
        n: A number.
    """
    await trio.sleep(1)
    return f"counted {n}"


async def test_an_exclusive_calls_result_is_kept_when_its_post_execute_is_cut_short(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20: an exclusive call whose body returned keeps its own result when the step is
    aborted while post-execute runs, once no post-execute listener is left to see it.

    The listener unregisters itself, then waits; the cancel lands in that wait.
    Nothing is left to run post-execute, so the result the body returned is
    committed, as it is for a settled call of a parallel group.
    """
    model = ScriptedModel([CallTools([ToolCallSpec("_count", '{"n": 1}', id="c1")])])
    async with runtime(model, tools=[_count]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        unsubscribe: list[Any] = []

        async def leaving(*args: Any) -> Any:
            unsubscribe[0]()
            await trio.sleep(10)
            return await args[-1]()

        unsubscribe.append(rt.hooks.on("tools/post-execute", leaving, agent=agent))
        agent.send("go")
        await trio.sleep(5)
        agent.cancel("stop")
        await agent.wait_idle()
        (result,) = _results(agent.session.events)
        assert (result.content, result.is_error) == ((Text("counted 1"),), False)
        assert last_end_reason(agent.session.events).kind == "aborted"


class _CodedError(Exception):
    def __init__(self, message: str, code: object) -> None:
        super().__init__(message)
        self.code = code


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise ValueError("this message cannot be read")


@pytest.mark.parametrize(
    ("error", "message", "code"),
    [
        (
            retinue.RetinueError("plugin refused", code="PLUGIN_REFUSED"),
            "plugin refused",
            "PLUGIN_REFUSED",
        ),
        (_CodedError("foreign coded", "E42"), "foreign coded", "E42"),
        (_CodedError("numeric code", 42), "numeric code", None),
        (KeyError(), "KeyError", None),
        (_UnprintableError(), "_UnprintableError (its message could not be read)", None),
    ],
    ids=["retinue-code", "foreign-code", "non-string-code", "no-message", "unprintable"],
)
async def test_plugin_errors_are_normalised_and_keep_their_code(
    autojump_clock: trio.testing.MockClock, error: Exception, message: str, code: str | None
) -> None:
    """Edges / R7.45: a string ``code`` is kept; a message-less error is named by its type; odd codes drop."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def raising(*_args: object) -> None:
            raise error

        rt.hooks.on("agent/pre-step", raising, agent=agent)
        result = await agent.ask("go")
        assert result.reason == TurnEndReason.error(1, message, code)


async def test_tool_raising_an_unprintable_error_gets_an_error_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Edges / R9.2: a tool whose exception cannot be printed still yields an error result; the turn goes on."""

    @retinue.tool
    async def broken() -> str:
        """Fail in a way that cannot be described."""
        await trio.lowlevel.checkpoint()
        raise _UnprintableError

    model = ScriptedModel([CallTools([ToolCallSpec("broken", "{}", id="b")]), Reply("done")])
    async with runtime(model, tools=[broken]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert (result.reason.kind, result.text) == ("completed", "done")
        (answer,) = [e.data for e in of_type(agent.session.events, "tool/result")]
        assert isinstance(answer, ToolResultEvent)
        assert answer.is_error
        assert answer.content == (Text("Error: _UnprintableError (its message could not be read)"),)


async def test_dispose_during_streaming_keeps_the_chunks_and_ends_disposed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Edges / R2.36, R7.22: dispose mid-stream keeps the chunks so far, logs no message, ends ``disposed``."""
    model = ScriptedModel([Reply("a b c d e f", chunks=6, chunk_delay=1, usage=Usage(1, 1))])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(3.5)
        await agent.dispose()
        events = agent.session.events
        assert last_end_reason(events) == TurnEndReason.disposed()
        chunks = len(of_type(events, "assistant/chunk"))
        assert 1 <= chunks < 8
        assert of_type(events, "assistant/message") == []
        assert types_without_chunks(events)[-2:] == ["step/end", "turn/end"]
        check_session_invariants(events)


async def test_tool_harness_error_code_is_copied_to_the_tool_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Edges / R9.2, R9.3: coded harness errors (unknown tool, ToolError, timeout) land in ``tool/result.error``."""

    @retinue.tool
    async def refuses() -> str:
        """Always refuses with a code."""
        await trio.lowlevel.checkpoint()
        raise retinue.ToolError("quota exhausted", code="QUOTA")

    @retinue.tool(timeout=2)
    async def sleepy() -> str:
        """Runs past its timeout."""
        await trio.sleep(100)
        return "late"

    model = ScriptedModel(
        [
            CallTools(
                [
                    ToolCallSpec("missing", "{}", id="c1"),
                    ToolCallSpec("refuses", "{}", id="c2"),
                    ToolCallSpec("sleepy", "{}", id="c3"),
                ]
            ),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[refuses, sleepy]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("go")
        results = _results(agent.session.events)
        assert [r.error for r in results] == [
            ToolErrorInfo("ToolError", "UNKNOWN_TOOL"),
            ToolErrorInfo("ToolError", "QUOTA"),
            ToolErrorInfo("ToolError", "TOOL_TIMEOUT"),
        ]
        assert all(r.is_error for r in results)
        assert results[0].content == (Text('Error: unknown tool "missing"'),)
        dumped: list[Any] = [
            line
            for line in json.loads(json.dumps(agent.session.dump()))
            if line["type"] == "tool/result"
        ]
        assert [line["data"]["error"]["code"] for line in dumped] == [
            "UNKNOWN_TOOL",
            "QUOTA",
            "TOOL_TIMEOUT",
        ]


# -- Resume in the same runtime ------------------------------------------------------------


async def test_dispose_of_a_resumed_agent_disposes_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.8, R11.15: disposal is memoized per handle; a resumed agent with the same id is disposed anew."""
    model = ScriptedModel([Reply("one"), Hang()])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="same-id")
        await agent.ask("one")
        await agent.dispose()
        again = await rt.resume_agent("same-id", OPTIONS)
        again.send("two")
        await trio.sleep(1)
        with trio.move_on_after(60):
            await again.dispose()
        assert again.status == "disposed"
        assert turn_ends(again.session.events) == ["completed", "disposed"]


async def test_calls_whose_tool_call_observer_raises_still_get_one_result_each(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.8 / R9.25: a ``session/event`` observer raising on every ``tool/call`` fails the turn,
    but each logged call keeps exactly one result, and no later request carries one unanswered.
    """
    model = ScriptedModel(
        [CallTools([ToolCallSpec("ping"), ToolCallSpec("ping")]), Reply("done")], repeat_last=True
    )
    async with runtime(model, tools=[ping]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def observer(_session: Session, event: Event) -> None:
            if event.type == "tool/call":
                raise RuntimeError("tool/call observer failed")

        rt.hooks.on("session/event", observer, agent=agent)
        first = await agent.ask("go")
        await agent.ask("again")
    assert first.reason.kind == "error"
    check_session_invariants(agent.session.events)
    calls = [
        block.id
        for m in model.requests[-1].messages
        for block in m.content
        if isinstance(block, ToolCall)
    ]
    answered = [
        block.tool_call_id
        for m in model.requests[-1].messages
        for block in m.content
        if isinstance(block, ToolResultBlock)
    ]
    assert calls
    assert sorted(calls) == sorted(answered)


async def test_tool_calls_sharing_an_id_end_the_turn_with_an_error_and_log_no_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.15 / R9.25: results are matched to calls by id, so a message whose calls share
    one cannot be answered; the step fails (``DUPLICATE_TOOL_CALL_ID``) before any call is
    logged, and the next turn runs on a valid history.
    """
    model = ScriptedModel(
        [
            CallTools([ToolCallSpec("ping", id="same"), ToolCallSpec("ping", id="same")]),
            Reply("fine"),
        ]
    )
    async with runtime(model, tools=[ping]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        first = await agent.ask("go")
        second = await agent.ask("again")
    assert (first.reason.kind, first.reason.code) == ("error", "DUPLICATE_TOOL_CALL_ID")
    assert second.reason.kind == "completed"
    events = agent.session.events
    assert not of_type(events, "tool/call")
    check_session_invariants(events)
