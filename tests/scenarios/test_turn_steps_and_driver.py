"""Pre-step, max tokens, raising step observers and the driver over many turns (T-L9..T-L12)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import (
    Continue,
    Message,
    Stop,
    Text,
    ToolCall,
)
from retinue.loop import summarize_turn
from retinue.providers import ProviderError, Usage
from retinue.session import (
    AssistantMessage,
    Event,
    Session,
    SessionHeader,
    UserMessage,
)
from retinue.testing import (
    CallTools,
    CutAtMaxTokens,
    Hang,
    RaiseMidStream,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_history_replay,
    check_session_invariants,
)
from tests.helpers import (
    OPTIONS,
    Next,
    echo,
    idle_events,
    of_type,
    record_statuses,
    runtime,
    turn_ends,
    types_without_chunks,
)

# -- T-L9: pre-step -------------------------------------------------------------------


async def test_pre_step_fires_once_per_step_before_step_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L9 / R7.19: pre-step runs once per step, before that step's ``step/start``, with the prompt."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("done")])
    async with runtime(model, tools=[echo], system_prompt="Be brief.") as rt:
        agent = await rt.create_agent("a", OPTIONS)
        calls: list[tuple[int, int, str, int, int]] = []

        def pre_step(
            _agent: object, turn: int, step: int, system: str, prefix: object, _signal: object
        ) -> None:
            starts = len(of_type(agent.session.events, "step/start"))
            calls.append((turn, step, system, len(prefix), starts))  # type: ignore[arg-type]

        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        await agent.ask("go")
        assert calls == [(1, 1, "Be brief.", 0, 0), (1, 2, "Be brief.", 0, 1)]


async def test_pre_step_raising_listener_fails_the_turn_and_the_driver_continues(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L9 / R7.47: a raising pre-step ends the turn ``error`` with no step; the next turn runs."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        failures = 0

        def pre_step(*_args: object) -> None:
            nonlocal failures
            failures += 1
            if failures == 1:
                raise RuntimeError("pre-step exploded")

        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        first = await agent.ask("one")
        assert first.reason.kind == "error"
        assert (first.reason.step, first.reason.message) == (1, "pre-step exploded")
        assert types_without_chunks(agent.session.events) == [
            "turn/start",
            "user/message",
            "turn/end",
        ]
        second = await agent.ask("two")
        assert second.reason.kind == "completed"
        check_session_invariants(agent.session.events)


# -- T-L10: max tokens ------------------------------------------------------------------


async def test_max_tokens_last_step_cut_ends_the_turn_max_tokens(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L10 / R7.23, R7.36: a cut last step ends the turn ``max-tokens``; its text is kept."""
    model = ScriptedModel([CutAtMaxTokens("partial answ", usage=Usage(9, 4))])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "max-tokens"
        assert result.text == "partial answ"
        assert result.usage == Usage(9, 4)
        assert turn_ends(agent.session.events) == ["max-tokens"]


async def test_max_tokens_earlier_cut_step_wins_after_a_completed_step_and_does_not_leak(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L10 / R7.23, R7.39: a cut step keeps the turn ``max-tokens`` after a later normal step, for that turn only."""
    model = ScriptedModel([CutAtMaxTokens("cut"), Reply("finished"), Reply("next turn")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        steps = 0

        def continue_once(_agent: object, _turn: int, _default: object, _next: Next) -> Any:
            nonlocal steps
            steps += 1
            return Continue() if steps == 1 else Stop()

        rt.hooks.on("agent/turn-continuation", continue_once, agent=agent)
        first = await agent.ask("go")
        assert first.reason.kind == "max-tokens"
        assert first.text == "finished"
        second = await agent.ask("again")
        assert second.reason.kind == "completed"
        assert turn_ends(agent.session.events) == ["max-tokens", "completed"]


async def test_max_tokens_truncated_tool_calls_are_never_dispatched(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L10 / R7.36: a cut step drops its tool calls (even ones step-result adds); safe text is kept."""
    ran: list[str] = []

    @retinue.tool
    async def risky(text: str) -> str:
        """Must not run on truncated input.

        Args:
            text: Anything.
        """
        ran.append(text)
        await trio.lowlevel.checkpoint()
        return "ran"

    model = ScriptedModel(
        [CutAtMaxTokens("safe text", tool_calls=[ToolCallSpec("risky", '{"text": "trun', id="c1")])]
    )
    async with runtime(model, tools=[risky]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        seen: list[Message] = []

        async def add_call(
            _agent: object, _turn: int, _step: int, message: Message, next_: Next
        ) -> Message:
            seen.append(message)
            result = await next_()
            return Message("assistant", (*result.content, ToolCall("c2", "risky", '{"text": "x"}')))

        rt.hooks.on("agent/step-result", add_call, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "max-tokens"
        assert seen[0].content == (Text("safe text"),)
        events = agent.session.events
        message = of_type(events, "assistant/message")[0].data
        assert isinstance(message, AssistantMessage)
        assert message.content == (Text("safe text"),)
        assert of_type(events, "tool/call") == []
        assert of_type(events, "tool/result") == []
        assert ran == []
        assert model.statistics().calls == 1


@pytest.mark.parametrize("step", [CutAtMaxTokens(""), Reply("")], ids=["max-tokens", "stop"])
async def test_max_tokens_empty_message_without_usage_is_not_logged(
    autojump_clock: trio.testing.MockClock, step: Any
) -> None:
    """T-L10 / R7.36: an empty reply without usage logs no ``assistant/message`` (max-tokens and stop)."""
    model = ScriptedModel([step])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert of_type(agent.session.events, "assistant/message") == []
        assert result.text == ""
        assert [m.role for m in agent.session.derive_messages()] == ["user"]
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize(
    "step",
    [CutAtMaxTokens("", usage=Usage(3, 0)), Reply("", usage=Usage(3, 0))],
    ids=["max-tokens", "stop"],
)
async def test_max_tokens_empty_message_with_usage_hosts_the_usage_only(
    autojump_clock: trio.testing.MockClock, step: Any
) -> None:
    """T-L10 / R7.36, R5.2: an empty reply with usage is logged to carry it, but never reaches history."""
    model = ScriptedModel([step])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        messages = of_type(agent.session.events, "assistant/message")
        assert len(messages) == 1
        assert messages[0].data == AssistantMessage(1, 1, (), Usage(3, 0))
        assert result.usage == Usage(3, 0)
        assert [m.role for m in agent.session.derive_messages()] == ["user"]


# -- T-L11: raising step/end observer -----------------------------------------------------


async def test_raising_step_end_observer_fails_the_turn_not_completed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L11 / R7.25: a ``session/event`` observer raising on ``step/end`` ends the turn ``error``."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("never"), Reply("ok")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        armed = True

        def observer(_session: Session, event: Event) -> None:
            if armed and event.type == "step/end":
                raise RuntimeError("step/end observer failed")

        rt.hooks.on("session/event", observer, agent=agent)
        first = await agent.ask("go")
        assert first.reason.kind == "error"
        assert (first.reason.step, first.reason.message) == (1, "step/end observer failed")
        assert model.statistics().calls == 1
        kinds = types_without_chunks(agent.session.events)
        assert kinds[-2:] == ["step/end", "turn/end"]
        armed = False
        second = await agent.ask("again")
        assert second.reason.kind == "completed"
        check_session_invariants(agent.session.events)


# -- T-L12: the driver over many turns --------------------------------------------------------


async def test_sends_during_a_turn_are_batched_into_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L12 / R3.8: prompts queued while a turn runs form the next turn, one user message each, in order."""
    model = ScriptedModel([Reply("one", delay=5), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        agent.send("first")
        await trio.sleep(1)
        agent.send("second")
        agent.send("third")
        events = await idle_events(agent)
        starts = [e.data.turn for e in of_type(events, "turn/start")]  # type: ignore[union-attr]
        assert starts == [1, 2]
        second_turn = events[[e.type for e in events].index("turn/start", 1) :]
        prompts = [e.data.content[0].text for e in of_type(second_turn, "user/message")]  # type: ignore[union-attr]
        assert prompts == ["second", "third"]
        assert statuses == ["running", "idle"]


async def test_flush_is_awaited_before_the_turn_settles(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L12 / R7.2, R7.49: ask and wait_idle return only after the post-``turn/end`` flush finished."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        flushed: list[float] = []

        async def slow_flush(_agent: object, session: Session) -> None:
            assert session.events[-1].type == "turn/end"
            await trio.sleep(7)
            flushed.append(trio.current_time())

        rt.hooks.on("session/flush", slow_flush, agent=agent)
        start = trio.current_time()
        await agent.ask("hi")
        assert len(flushed) == 1
        assert trio.current_time() - start >= 7
        agent.send("again")
        await agent.wait_idle()
        assert len(flushed) == 2
        assert trio.current_time() == flushed[-1]


async def test_model_error_reports_agent_error_and_ends_the_turn_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L12 / R7.22, R7.45: a stream that raises is reported on ``agent/error`` and ends the turn ``error``."""
    boom = retinue.ModelError("provider exploded", code="UPSTREAM_500")
    model = ScriptedModel([RaiseMidStream(boom, after_chunks=2), Reply("recovered")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported: list[tuple[int, int, BaseException]] = []
        rt.hooks.on(
            "agent/error",
            lambda _a, turn, step, error: reported.append((turn, step, error)),
            agent=agent,
        )
        result = await agent.ask("go")
        assert result.reason == retinue.session.TurnEndReason.error(
            1, "provider exploded", "UPSTREAM_500"
        )
        assert reported == [(1, 1, boom)]
        assert result.error is boom
        assert len(of_type(agent.session.events, "assistant/chunk")) == 2
        assert of_type(agent.session.events, "assistant/message") == []
        again = await agent.ask("again")
        assert again.reason.kind == "completed"
        assert again.error is None
        check_session_invariants(agent.session.events)


async def test_an_ask_gets_the_provider_error_that_ended_its_turn_with_its_retry_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.12, R7.45: the log keeps an error end's message and code; the ask's result also
    carries the exception, so a caller can read a provider's ``retry_after`` (which the
    log does not keep) and know when to send again."""
    refused = ProviderError(
        "rate limited", code="rate_limit_exceeded", status=429, retry_after=600.0
    )
    model = ScriptedModel([RaiseMidStream(refused), Reply("later")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert (result.reason.kind, result.reason.code) == ("error", "rate_limit_exceeded")
        assert isinstance(result.error, ProviderError)
        assert result.error is refused
        assert result.error.retry_after == 600.0
        # Equality is the logged end's: the exception is what the log could not keep.
        assert result == retinue.TurnResult(result.turn, result.reason, result.text, result.usage)
        assert (await agent.ask("again")).error is None


async def test_a_turn_ended_by_a_lookup_error_names_its_type_beside_the_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.12, R7.45: the log keeps only an error end's message, so a message that is
    a lookup's bare key is led by the exception's type; one that stands alone is kept."""
    model = ScriptedModel(
        [RaiseMidStream(KeyError("temperature")), RaiseMidStream(ValueError("disk is full"))]
    )
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        keyed = await agent.ask("go")
        plain = await agent.ask("again")
    assert keyed.reason == retinue.session.TurnEndReason.error(1, "KeyError: 'temperature'")
    assert plain.reason == retinue.session.TurnEndReason.error(1, "disk is full")
    assert isinstance(keyed.error, KeyError)


async def test_runtime_exit_mid_turn_stops_the_loop(autojump_clock: trio.testing.MockClock) -> None:
    """T-L12 / R2.36, R12.10: leaving the runtime while a turn runs ends it ``disposed``; the driver exits."""
    model = ScriptedModel([Hang("thinking")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(3)
        agent.send("queued, never run")
    assert agent.status == "disposed"
    assert turn_ends(agent.session.events) == ["disposed"]
    assert len(of_type(agent.session.events, "turn/start")) == 1
    assert model.statistics().calls == 1
    check_session_invariants(agent.session.events)


async def test_replaying_the_log_yields_identical_history(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L12 / R5.6: a fresh session seeded with the log derives exactly the live history."""
    model = ScriptedModel(
        [
            CallTools(
                [ToolCallSpec("echo", '{"text": "a"}'), ToolCallSpec("echo", '{"text": "b"}')],
                text="calling",
            ),
            Reply("done", reasoning="thought"),
            Reply("second turn"),
        ]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.inject("a fact")
        await agent.ask("go")
        agent.steer("steer as send")
        events = await idle_events(agent)
        replayed = Session.from_events(SessionHeader("replay", 0), events)
        assert list(replayed.derive_messages()) == list(agent.session.derive_messages())
        assert replayed.last_turn == agent.session.last_turn
        assert replayed.current_header == agent.session.current_header
        check_history_replay(events)
        check_session_invariants(events)
        assert isinstance(of_type(events, "user/message")[-1].data, UserMessage)


@pytest.mark.parametrize(
    ("last", "text"),
    [(Reply("final", usage=Usage(4, 3)), "final"), (Reply("", usage=Usage(4, 3)), "looking")],
    ids=["last-step-text", "earlier-step-text"],
)
async def test_ask_returns_the_last_text_and_the_summed_usage_the_log_holds(
    autojump_clock: trio.testing.MockClock, last: Any, text: str
) -> None:
    """DESIGN 3 (``ask -> TurnResult``): the turn's last non-empty assistant text, its summed usage."""
    model = ScriptedModel(
        [
            CallTools([ToolCallSpec("echo", '{"text": "x"}')], text="looking", usage=Usage(2, 1)),
            last,
        ]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert (result.text, result.usage) == (text, Usage(6, 4))
        assert (result.text, result.usage) == summarize_turn(agent.session.events, 1)
