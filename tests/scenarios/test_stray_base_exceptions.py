"""User code failing other than with a ``trio.Cancelled`` of its own: a BaseException
that is no cancellation (from the model, an observer or a tool body), Ctrl-C in a tool
body, and an error whose code cannot be read (R7.40, R7.48, R12.10)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue._content import content_text
from retinue.session import Event, ToolResultEvent
from retinue.testing import (
    CallTools,
    RaiseMidStream,
    Reply,
    ScriptedModel,
    Step,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, echo, last_end_reason, of_type, raises_ctrl_c, runtime


class _Fatal(BaseException):
    """Not an Exception: raised on, trio would let it end the runtime."""


@retinue.tool
async def fatal() -> str:
    """Raise a BaseException that is no cancellation."""
    await trio.lowlevel.checkpoint()
    raise _Fatal("fatal")


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (SystemExit(3), "raised SystemExit: 3"),
        (GeneratorExit(), "raised GeneratorExit"),
        (_Fatal("fatal"), "raised _Fatal: fatal"),
        (BaseExceptionGroup("nursery", [_Fatal("fatal")]), "raised _Fatal: fatal"),
    ],
    ids=["SystemExit", "GeneratorExit", "own-subclass", "group"],
)
async def test_a_model_raising_a_base_exception_ends_only_its_turn(
    autojump_clock: trio.testing.MockClock, error: BaseException, raised: str
) -> None:
    """R7.45, R7.48: a model's BaseException that is neither Ctrl-C nor a cancel (a
    ``SystemExit``, a ``GeneratorExit``, a subclass of the user's, a group of them from a
    nursery the stream opened) is its failure, as a listener's or a tool body's is: its turn
    ends ``error``, code ``UNKNOWN``, naming the model stream and what it raised, and the
    runtime runs on: the agent answers its next prompt and another agent is served."""
    script: list[Step] = [RaiseMidStream(error, after_chunks=2), Reply("recovered")]
    model = ScriptedModel({"bad": script, "good": [Reply("fine")]})
    async with runtime(model) as rt:
        agent = await rt.create_agent("bad", AgentOptions(model="bad"))
        other = await rt.create_agent("good", AgentOptions(model="good"))
        answer = await agent.ask("go")
        events = agent.session.events
        assert (answer.reason.kind, answer.reason.code) == ("error", "UNKNOWN")
        assert f"the model stream {raised}" in (answer.reason.message or "")
        assert last_end_reason(events) == answer.reason
        assert (await agent.ask("again")).text == "recovered"
        assert (await other.ask("hi")).text == "fine"
        check_session_invariants(events)


async def test_ctrl_c_a_model_raises_still_ends_the_runtime(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: Ctrl-C landing in the model's stream is no failure of the model: it ends the
    runtime, and comes out of it as the KeyboardInterrupt it is; the turn is logged closed."""
    model = ScriptedModel([RaiseMidStream(KeyboardInterrupt(), after_chunks=2)])
    sessions: list[retinue.Session] = []
    with raises_ctrl_c():
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            sessions.append(agent.session)
            await agent.ask("go")
    assert last_end_reason(sessions[0].events).kind == "disposed"
    check_session_invariants(sessions[0].events)


async def test_an_observer_raising_a_base_exception_on_a_call_logs_it_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.8, R7.44, R7.48, R9.21: a session observer's BaseException on a ``tool/call`` is
    its failure, not the runtime's end: the call is logged once and answered as never
    started, and the turn is closed with that error, which names the observer."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "hi"}')]), Reply("ok")])

    def fatal_on_call(event: Event) -> None:
        if event.type == "tool/call":
            raise _Fatal("fatal")

    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        unsubscribe = agent.session.observe(fatal_on_call)
        answer = await agent.ask("go")
        events = agent.session.events
        assert len(of_type(events, "tool/call")) == 1
        assert (answer.reason.kind, answer.reason.code) == ("error", "UNKNOWN")
        assert "fatal_on_call" in (answer.reason.message or "")
        assert last_end_reason(events) == answer.reason
        [result] = [event.data for event in events if isinstance(event.data, ToolResultEvent)]
        assert result.error is not None
        assert result.error.code == "ABORTED_BEFORE_DISPATCH"
        unsubscribe()
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(events)


async def test_a_body_raising_its_own_base_exception_fails_only_its_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.2, R7.48: a tool body's BaseException that is neither Ctrl-C nor a cancel is the call's
    error result, and the turn goes on to its answer; the runtime does not end."""
    model = ScriptedModel([CallTools([ToolCallSpec("fatal", "{}")]), Reply("recovered")])
    async with runtime(model, tools=[fatal]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        answer = await agent.ask("go")
        assert (answer.reason.kind, answer.text) == ("completed", "recovered")
        [result] = [e.data for e in agent.session.events if isinstance(e.data, ToolResultEvent)]
        assert (result.is_error, content_text(result.content)) == (True, "Error: fatal")


@retinue.tool
async def interrupted() -> str:
    """Ctrl-C landing in a tool body."""
    await trio.lowlevel.checkpoint()
    raise KeyboardInterrupt


async def test_ctrl_c_in_a_body_ends_the_turn_as_a_disposal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40, R12.10: Ctrl-C interrupts from outside, like the runtime's teardown: the
    turn is logged disposed, no agent/error is reported, and the interrupt goes on."""
    model = ScriptedModel([CallTools([ToolCallSpec("interrupted", "{}")]), Reply("never")])
    sessions: list[retinue.Session] = []
    errors: list[BaseException] = []
    with raises_ctrl_c():
        async with runtime(model, tools=[interrupted]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
            sessions.append(agent.session)
            await agent.ask("go")
    assert last_end_reason(sessions[0].events).kind == "disposed"
    assert errors == []
    check_session_invariants(sessions[0].events)


async def test_ctrl_c_in_one_agents_tool_closes_and_stores_every_agents_turn(
    tmp_path: Path,
) -> None:
    """R12.9, R12.10: Ctrl-C in one agent's tool body ends the runtime, which disposes
    every agent first: each stored log ends with its turn's ``turn/end``, the other
    agent's turn (waiting in its own tool) included."""
    waiting = trio.Event()

    @retinue.tool
    async def wait() -> str:
        """Wait until disposed."""
        waiting.set()
        await trio.sleep_forever()
        raise AssertionError("not reached")

    @retinue.tool
    async def stopped() -> str:
        """Ctrl-C once the other agent waits."""
        await waiting.wait()
        raise KeyboardInterrupt

    model = ScriptedModel(
        {
            name: [CallTools([ToolCallSpec(name, "{}")]), Reply("never")]
            for name in ("wait", "stopped")
        }
    )
    # A real-time bound: the JSONL store writes in worker threads, which the virtual clock
    # would jump past.
    with trio.fail_after(60), raises_ctrl_c():
        async with retinue.open_runtime(
            models=model, tools=[wait, stopped], store=retinue.JSONLStore(tmp_path)
        ) as rt:
            for name in ("wait", "stopped"):
                agent = await rt.create_agent(name, AgentOptions(model=name), session_id=name)
                agent.send("go")
            await trio.sleep_forever()
    async with retinue.JSONLStore(tmp_path) as store:
        for name in ("wait", "stopped"):
            events = (await store.inspect(name)).events
            assert last_end_reason(events).kind == "disposed"
            check_session_invariants(events)


class _UnreadableCodeError(Exception):
    @property
    def code(self) -> str:
        raise RuntimeError("code unreadable")


async def test_an_error_whose_code_cannot_be_read_fails_the_turn_not_the_driver(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.45, R7.48: the turn ends as an error without a code of its own; reading the code does not
    crash the driver, and a second such turn leaves the agent serving, not disposed."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def pre_step(*_args: object) -> None:
            raise _UnreadableCodeError("no step today")

        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        for _ in range(3):
            result = await agent.ask("go")
            assert result.reason.kind == "error"
            assert "no step today" in (result.reason.message or "")
        assert agent.status == "idle"
        check_session_invariants(agent.session.events)
