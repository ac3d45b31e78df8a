"""check_session_invariants on a step's model output: its header first (R7.34), its chunks, then
one message sourced from exactly them (R7.36), then the tool calls it lists (R9.10)."""

from __future__ import annotations

import pytest
import trio

import retinue
from retinue._content import Text, ToolCall
from retinue._request import LlmCallConfig
from retinue._stream import TextDelta
from retinue.session import (
    AssistantChunk,
    AssistantMessage,
    Event,
    RequestHeaderDelta,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
)
from retinue.testing import (
    CallTools,
    InvariantError,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.unit.test_checks import DONE, HEADER, TRIGGER, log, text

CHUNK = AssistantChunk(1, 1, TextDelta(0, "x"))
MESSAGE = AssistantMessage(1, 1, text("x"))
OPENING = (TurnStart(1, TRIGGER), UserMessage(text("hi")), StepStart(1, 1), HEADER, CHUNK)
CLOSING = (StepEnd(1, 1), TurnEnd(1, DONE))


def step_log(*output: object) -> list[Event]:
    """Turn 1, step 1 with one chunk at seq 4, then *output*, then the step and turn close."""
    return log(*OPENING, *output, *CLOSING)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("events", "seq", "message"),
    [
        (step_log((MESSAGE, [1])), 5, r"source_event_seqs \[1\] are not the step's chunk"),
        (step_log(MESSAGE), 5, r"source_event_seqs None are not the step's chunk seqs \[4\]"),
        (
            step_log((MESSAGE, [4]), AssistantChunk(1, 1, TextDelta(0, "y"))),
            6,
            r"assistant/chunk after the step's assistant/message \(seq 5\)",
        ),
        (
            step_log((MESSAGE, [4]), (MESSAGE, [4])),
            6,
            r"a second assistant/message in the step \(the first at seq 5\)",
        ),
        (
            log(
                *OPENING,
                (MESSAGE, [4]),
                StepEnd(1, 1),
                StepStart(1, 2),
                AssistantChunk(1, 2, TextDelta(0, "z")),
                (AssistantMessage(1, 2, text("z")), [4]),
            ),
            9,
            r"source_event_seqs \[4\] are not the step's chunk seqs \[8\]",
        ),
        (
            step_log(AssistantChunk(1, 1, TextDelta(0, "y")), (MESSAGE, [4])),
            6,
            r"source_event_seqs \[4\] are not the step's chunk seqs \[4, 5\]",
        ),
        (
            step_log(AssistantChunk(1, 1, TextDelta(0, "y")), (MESSAGE, [5, 4])),
            6,
            r"source_event_seqs \[5, 4\] are not the step's chunk seqs \[4, 5\]",
        ),
    ],
    ids=[
        "sourced-elsewhere",
        "unsourced",
        "chunk-after",
        "second-message",
        "earlier-step",
        "some-chunks",
        "out-of-order",
    ],
)
def test_check_session_invariants_r7_36_a_message_is_sourced_from_its_steps_chunks(
    events: list[Event], seq: int, message: str
) -> None:
    """R7.36: a step logs its chunks, then at most one ``assistant/message`` whose
    ``source_event_seqs`` are exactly those chunk seqs: a message sourced from another event or
    none, a chunk after it and a second message are each flagged."""
    with pytest.raises(InvariantError, match=rf"seq {seq} .*R7\.36: {message}"):
        check_session_invariants(events)


CALLING = AssistantMessage(1, 1, (Text("x"), ToolCall("c1", "t", "{}")))


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            step_log(
                (MESSAGE, [4]),
                ToolCallEvent(1, 1, "c1", "t", "{}"),
                (ToolResultEvent(1, 1, "c1", text("ok")), [6]),
            ),
            r"seq 6 .*R9\.10: tool/call 'c1' not among the tool calls",
        ),
        (
            step_log(
                ToolCallEvent(1, 1, "c1", "t", "{}"),
                (CALLING, [4]),
                (ToolResultEvent(1, 1, "c1", text("ok")), [5]),
            ),
            r"seq 5 .*R9\.10: tool/call 'c1' before the step's assistant/message",
        ),
        (
            step_log(
                (CALLING, [4]),
                ToolCallEvent(1, 1, "c1", "delete_all", "{}"),
                (ToolResultEvent(1, 1, "c1", text("ok")), [6]),
            ),
            (
                r"seq 6 .*R9\.10: tool/call 'c1' records 'delete_all' with '\{\}', where the "
                r"message's block calls 't' with '\{\}'"
            ),
        ),
        (
            step_log(
                (CALLING, [4]),
                ToolCallEvent(1, 1, "c1", "t", '{"all": true}'),
                (ToolResultEvent(1, 1, "c1", text("ok")), [6]),
            ),
            r"seq 6 .*R9\.10: tool/call 'c1' records 't' with '\{\"all\": true\}'",
        ),
    ],
    ids=["not-listed", "before-the-message", "another-tool", "other-arguments"],
)
def test_check_session_invariants_r9_10_a_tool_call_starts_a_call_of_the_message(
    events: list[Event], message: str
) -> None:
    """R9.10, R9.15: the calls a step starts are the tool-call blocks of its logged assistant
    message, each ``tool/call`` after it: a call the message does not list, logged ahead of the
    message, or recording another tool or other arguments than its block, is flagged."""
    with pytest.raises(InvariantError, match=message):
        check_session_invariants(events)


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            log(*OPENING, RequestHeaderDelta(config=LlmCallConfig("m2")), (MESSAGE, [4])),
            r"seq 5 \(request/header-delta\): R7\.34: .* after the step's model output \(seq 4\)",
        ),
        (
            log(*OPENING[:3], HEADER, AssistantMessage(1, 1, text("x")), HEADER),
            r"seq 5 \(request/header\): R7\.34: .* after the step's model output \(seq 4\)",
        ),
    ],
    ids=["delta-after-a-chunk", "header-after-the-message"],
)
def test_check_session_invariants_r7_34_a_steps_header_precedes_its_output(
    events: list[Event], message: str
) -> None:
    """R7.34: the header event a step owes is logged before its model call, so before the step's
    chunks and message: a header logged after them is flagged."""
    with pytest.raises(InvariantError, match=message):
        check_session_invariants(events)


def test_check_session_invariants_r7_36_takes_a_message_of_a_step_without_chunks() -> None:
    """R7.36: a step that streamed no chunk logs its message without sources."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        HEADER,
        AssistantMessage(1, 1, (Text("x"),)),
        *CLOSING,
    )
    check_session_invariants(events)


async def test_check_session_invariants_passes_a_runtime_log_of_streamed_steps(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36: the messages of steps streamed in several chunks, tool calls included, pass."""

    @retinue.tool
    async def lookup(key: str) -> str:
        """Look up a key.

        Args:
            key: what to look up.
        """
        return key

    calls = CallTools(
        [ToolCallSpec("lookup", '{"key": "a"}')] * 2, chunks_per_call=3, text="let me see"
    )
    model = ScriptedModel([calls, Reply("found it", chunks=4)])
    with trio.fail_after(10):
        async with retinue.open_runtime(models=model, tools=[lookup]) as rt:
            agent = await rt.create_agent("a", retinue.AgentOptions(model="m"))
            await agent.ask("go")
            events = agent.session.events
    assert sum(isinstance(event.data, AssistantMessage) for event in events) == 2
    check_session_invariants(events)


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        (TurnEndReason.rejected("blocked"), r"R7\.39: turn 1 ends rejected after 1 step\(s\)"),
        (TurnEndReason.error(3, "boom"), r"R4\.12: turn 1 ends error at step 3 of 1"),
        (TurnEndReason.error(-1, "boom"), r"R4\.12: turn 1 ends error at step -1 of 1"),
    ],
    ids=["rejected-after-a-step", "error-past-the-next-step", "error-before-step-0"],
)
def test_check_session_invariants_a_turns_end_fits_the_steps_it_ran(
    reason: TurnEndReason, message: str
) -> None:
    """R4.12, R7.39: a ``rejected`` turn ran no step, and an ``error`` names a step the turn ran
    or the one it failed to open: an end no loop could log for the steps logged is flagged."""
    events = log(*OPENING, (MESSAGE, [4]), StepEnd(1, 1), TurnEnd(1, reason))
    with pytest.raises(InvariantError, match=rf"seq 7 \(turn/end\): {message}"):
        check_session_invariants(events)


@pytest.mark.parametrize(
    "reason",
    [TurnEndReason.error(0, "prompt-submit failed"), TurnEndReason.error(2, "pre-step failed")],
    ids=["before-any-step", "opening-the-next-step"],
)
def test_check_session_invariants_takes_an_error_before_a_step_opened(
    reason: TurnEndReason,
) -> None:
    """R4.12: a turn fails at step 0 before any step, or at the step a listener failed to open."""
    check_session_invariants(log(*OPENING, (MESSAGE, [4]), *CLOSING[:1], TurnEnd(1, reason)))
    check_session_invariants(log(TurnStart(1, TRIGGER), TurnEnd(1, TurnEndReason.rejected("x"))))
