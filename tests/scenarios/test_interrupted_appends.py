"""Ctrl-C landing inside the append of a step's message or of a tool result, before the event
is logged, and an observer raising once it is: the log stays a transcript every later request
can be built from (R9.10, R9.25, R12.10).

Trio raises Ctrl-C at whatever bytecode runs when it comes; an append validating a large event
is a likely place. No public seam runs inside an append before the event is logged (a session
observer runs after it), so these tests wrap ``Session.append`` to raise there, as the signal
would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import trio
import trio.testing

import retinue
from retinue import ToolCall, ToolResultBlock
from retinue.providers import ModelRequest
from retinue.session import AssistantMessage, Event, EventData, Session, StepEnd, ToolResultEvent
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.helpers import DEADLINE, OPTIONS, echo, runtime

_Append = Callable[..., object]


def _interrupt_appends(
    monkeypatch: pytest.MonkeyPatch, kind: type[EventData], nths: Sequence[int]
) -> list[int]:
    """Make the *nths* appends of a *kind* event raise Ctrl-C on entry; returns those that did.

    Both ways the loop appends are wrapped: ``append``, and ``append_message`` for a
    step's message.
    """
    real: _Append = Session.append
    real_message: _Append = Session.append_message
    seen: list[int] = []
    fired: list[int] = []

    def interrupt(data: EventData) -> None:
        if type(data) is kind:
            seen.append(1)
            if len(seen) in nths:
                fired.append(len(seen))
                raise KeyboardInterrupt

    def append(self: Session, data: EventData, **options: object) -> object:
        interrupt(data)
        return real(self, data, **options)

    def append_message(self: Session, data: EventData, chunk_seqs: object) -> object:
        interrupt(data)
        return real_message(self, data, chunk_seqs)

    monkeypatch.setattr(Session, "append", append)
    monkeypatch.setattr(Session, "append_message", append_message)
    return fired


def _two_calls() -> ScriptedModel:
    calls = [ToolCallSpec("echo", '{"text": "one"}'), ToolCallSpec("echo", '{"text": "two"}')]
    return ScriptedModel([CallTools(calls), Reply("never")])


async def _ask_into_ctrl_c(store: MemoryStore | None = None) -> Session:
    """Ask an agent whose turn Ctrl-C ends; returns its session, stored in *store* if given."""
    sessions: list[Session] = []
    caught: BaseException | None = None
    try:
        with trio.fail_after(DEADLINE):
            async with retinue.open_runtime(models=_two_calls(), tools=[echo], store=store) as rt:
                agent = await rt.create_agent("a", OPTIONS)
                sessions.append(agent.session)
                await agent.ask("go")
    except BaseException as exc:  # a group would end the test run: judged below
        caught = exc
    assert isinstance(caught, KeyboardInterrupt), f"got {caught!r}"
    return sessions[0]


async def _resumed_request(store: MemoryStore, agent_id: str) -> ModelRequest:
    """The request a resumed agent's next ask sends, once its log is checked."""
    model = ScriptedModel([Reply("again")])
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model, tools=[echo], store=store) as rt:
            agent = await rt.resume_agent(agent_id, OPTIONS)
            events = agent.session.events
            check_session_invariants(events)
            check_no_dangling_tool_calls(events)
            assert (await agent.ask("again")).text == "again"
    return model.requests[-1]


def _unanswered(request: ModelRequest) -> tuple[set[str], set[str]]:
    """The calls of *request* without a result, and the results without a call."""
    blocks = [block for message in request.messages for block in message.content]
    calls = {block.id for block in blocks if isinstance(block, ToolCall)}
    results = {block.tool_call_id for block in blocks if isinstance(block, ToolResultBlock)}
    return calls - results, results - calls


@pytest.mark.parametrize(
    ("kind", "nths"),
    [
        (ToolResultEvent, [1]),
        (ToolResultEvent, [2]),
        (AssistantMessage, [1]),
    ],
    ids=["first-result", "second-result", "message"],
)
async def test_ctrl_c_inside_an_append_leaves_every_logged_call_answered(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    kind: type[EventData],
    nths: list[int],
) -> None:
    """R9.10, R9.25, R12.10: Ctrl-C raised inside the append of a ``tool/result`` or of the
    step's ``assistant/message``, before the event is logged, ends the runtime; the turn is
    closed with every call its logged message holds answered once, and none answered whose
    message is not logged. Resumed, the agent's next request holds no call without its result,
    which a provider would refuse, nor a result without its call."""
    async with MemoryStore() as store:
        fired = _interrupt_appends(monkeypatch, kind, nths)
        agent_id = (await _ask_into_ctrl_c(store)).id
        assert fired == nths
        monkeypatch.undo()
        request = await _resumed_request(store, agent_id)
    assert _unanswered(request) == (set(), set())


async def test_an_observer_raising_on_a_message_with_calls_leaves_them_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.8, R9.21, R9.25: an observer raising on the step's ``assistant/message`` raises once
    the message is logged, so each call it holds is answered as never started, and the turn ends
    as that observer's error."""

    def raise_on_the_message(event: Event) -> None:
        if event.type == "assistant/message":
            raise RuntimeError("observer failed")

    async with runtime(_two_calls(), tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.session.observe(raise_on_the_message)
        result = await agent.ask("go")
        events = agent.session.events
        assert result.reason.kind == "error"
        codes = [
            event.data.error.code if event.data.error else None
            for event in events
            if isinstance(event.data, ToolResultEvent)
        ]
        assert codes == ["ABORTED_BEFORE_DISPATCH"] * 2
        check_session_invariants(events)
        check_no_dangling_tool_calls(events)


async def test_ctrl_c_inside_the_step_end_append_leaves_the_step_for_the_close(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R7.40, R12.10: Ctrl-C raised inside the append of ``step/end``, before it is logged,
    leaves the step open for the turn's close, which logs it and then ``turn/end``: the log
    ends balanced, not with a turn only a load's repair closes."""
    _interrupt_appends(monkeypatch, StepEnd, [1])
    events = (await _ask_into_ctrl_c()).events
    assert [event.type for event in events[-2:]] == ["step/end", "turn/end"]
    check_session_invariants(events)
