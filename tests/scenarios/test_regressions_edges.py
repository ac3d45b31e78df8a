"""The coverage edges of the contract: refused turn starts, odd tool arguments, settled results
under post-execute, plugin errors, disposal mid-stream, and a resumed agent in the same
runtime (SPEC 7.7, 9).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import MessageSource, Text, ToolCall, ToolResultBlock
from retinue.providers import Usage
from retinue.session import (
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
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import (
    OPTIONS,
    echo,
    last_end_reason,
    of_type,
    runtime,
    turn_ends,
    types_without_chunks,
    user_texts,
)
from tests.scenarios._regressions_kit import _results, ping

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
