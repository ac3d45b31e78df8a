"""What the step's assistant message may hold, and who is named when it holds more (R7.36)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import pytest
import trio
import trio.testing

from retinue import Message, Text, ToolCall, ToolResultBlock
from retinue._content import ContentBlock
from retinue.providers import BlockEnd, BlockStart, Finish, Stop, TextDelta
from retinue.testing import (
    CallTools,
    RawChunks,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, Next, last_end_reason, of_type, runtime

_RESULT = ToolResultBlock("call-9", (Text("sunny"),))


def _holding_a_result() -> RawChunks:
    """A model's step whose message closes a block with a tool result."""
    return RawChunks(
        [
            BlockStart(0, "text"),
            TextDelta(0, "hi"),
            BlockEnd(0, Text("hi")),
            BlockEnd(1, _RESULT),
            Finish(Stop()),
        ]
    )


def _sharing_an_id() -> CallTools:
    """A model's step giving two calls one id (an adapter would have renamed one)."""
    return CallTools([ToolCallSpec("lookup", id="same"), ToolCallSpec("lookup", id="same")])


async def _pass_through(
    _agent: object, _turn: int, _step: int, _m: Message, proceed: Next
) -> Message:
    """A step-result listener handing back the message it is given."""
    message: Message = await proceed()
    return message


async def _note_reviewed(
    _agent: object, _turn: int, _step: int, _m: Message, proceed: Next
) -> Message:
    """A step-result listener that appends a note to whatever message it is given."""
    message: Message = await proceed()
    return Message("assistant", (*message.content, Text("[reviewed]")))


async def _copy_blocks(
    _agent: object, _turn: int, _step: int, _m: Message, proceed: Next
) -> Message:
    """A step-result listener that hands back a copy of every block it is given."""
    message: Message = await proceed()
    return Message("assistant", tuple(attrs.evolve(block) for block in message.content))


def _tool_results_in(history: list[Message]) -> list[ToolResultBlock]:
    return [b for m in history for b in m.content if isinstance(b, ToolResultBlock)]


def _adding_in_turn_one(*blocks: ContentBlock) -> Callable[..., Awaitable[Message]]:
    """A step-result listener adding *blocks* to the first turn's message."""

    async def add(_agent: object, turn: int, _step: int, _m: Message, proceed: Next) -> Message:
        message: Message = await proceed()
        if turn != 1:
            return message
        return Message("assistant", (*message.content, *blocks))

    return add


_SAME_ID_TWICE = (ToolCall("same", "lookup", "{}"), ToolCall("same", "lookup", "{}"))


@pytest.mark.parametrize(
    ("added", "problem"),
    [
        ((_RESULT,), "holds a tool-result block (content[1]), which only a tool/result holds"),
        (_SAME_ID_TWICE, "gives two tool calls the same id 'same'"),
    ],
    ids=["tool-result", "shared-id"],
)
async def test_a_step_result_listener_adding_faulty_blocks_fails_the_turn_naming_it(
    autojump_clock: trio.testing.MockClock, added: tuple[ContentBlock, ...], problem: str
) -> None:
    """R7.36, R7.47, R9.5: a step-result listener handing back an assistant message that holds a
    tool result (the step's ``tool/result`` alone holds one) or two calls of one id (results are
    matched to calls by id) fails the turn with a HookError naming the seam, and no assistant
    message is logged. Logged as the assistant's, the tool result would ride in every later request
    (Anthropic refuses a tool_result in an assistant turn; OpenAI's adapter drops it), and the
    shared id would fail the turn as the model's DUPLICATE_TOOL_CALL_ID, sending whoever reads it to
    the model."""
    model = ScriptedModel([Reply("hello"), Reply("again")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/step-result", _adding_in_turn_one(*added), agent=agent)
        result = await agent.ask("go")
        assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
        assert result.reason.message == f"agent/step-result returned a message that {problem}"
        assert of_type(agent.session.events, "assistant/message") == []
        assert (await agent.ask("next")).text == "again"
        assert _tool_results_in(list(agent.session.derive_messages())) == []
        check_session_invariants(agent.session.events)


async def test_a_model_message_holding_a_tool_result_fails_the_turn_naming_the_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36: a model whose stream closes a block with a tool result fails the turn
    with a ModelError (``INVALID_STREAM``), and no assistant message is logged; a
    step-result listener that hands the model's message back unchanged is not blamed."""
    model = ScriptedModel([_holding_a_result(), Reply("again")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/step-result", _pass_through, agent=agent)
        result = await agent.ask("go")
        reason = last_end_reason(agent.session.events)
        assert (reason.kind, reason.code) == ("error", "INVALID_STREAM")
        assert reason.message == (
            "the model's message holds a tool-result block (content[1]), "
            "which only a tool/result holds"
        )
        assert result.reason == reason
        assert of_type(agent.session.events, "assistant/message") == []
        assert (await agent.ask("next")).text == "again"
        assert _tool_results_in(list(agent.session.derive_messages())) == []
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize("listener", [_pass_through, _note_reviewed, _copy_blocks])
@pytest.mark.parametrize(
    ("step", "code", "problem"),
    [
        (
            _holding_a_result,
            "INVALID_STREAM",
            "holds a tool-result block (content[1]), which only a tool/result holds",
        ),
        (_sharing_an_id, "DUPLICATE_TOOL_CALL_ID", "gives two tool calls the same id 'same'"),
    ],
    ids=["tool-result", "shared-id"],
)
async def test_a_listener_keeping_the_models_faulty_blocks_leaves_the_model_named(
    autojump_clock: trio.testing.MockClock,
    listener: Callable[..., Awaitable[Message]],
    step: Callable[[], RawChunks | CallTools],
    code: str,
    problem: str,
) -> None:
    """R7.36, R9.5: a message the model got wrong (a tool-result block, two calls of one id) fails
    the turn as the model's, naming the model, though a step-result listener handed it back, added a
    note to it or copied its blocks: neither a change nor a copy of the result block blames the
    listener (INVALID_HOOK_RESULT)."""
    model = ScriptedModel([step(), Reply("again")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/step-result", listener, agent=agent)
        with trio.fail_after(60):
            result = await agent.ask("go")
        assert (result.reason.kind, result.reason.code) == ("error", code)
        assert result.reason.message == f"the model's message {problem}"
        check_session_invariants(agent.session.events)


async def test_a_listener_repeating_one_of_the_models_call_ids_is_named(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36, R9.5: a call a step-result listener adds with the id of the model's one
    call fails the turn naming the listener: the model gave that id once."""
    model = ScriptedModel([CallTools([ToolCallSpec("lookup", id="once")]), Reply("again")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        repeat_call = _adding_in_turn_one(ToolCall("once", "lookup", "{}"))
        rt.hooks.on("agent/step-result", repeat_call, agent=agent)
        with trio.fail_after(60):
            result = await agent.ask("go")
        assert (result.reason.kind, result.reason.code) == ("error", "INVALID_HOOK_RESULT")
        assert result.reason.message == (
            "agent/step-result returned a message that gives two tool calls the same id 'once'"
        )
        check_session_invariants(agent.session.events)
