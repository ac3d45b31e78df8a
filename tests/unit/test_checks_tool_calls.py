"""Session-log invariant checkers on tool calls and their results: calls left without a result
(R9.25), results of another step or a repeated call id (R4.15), calls and results out of order
in history (R5.4) or against the model's order (R9.17)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from retinue._content import ToolCall
from retinue.session import (
    AssistantMessage,
    ContextMessage,
    Event,
    EventData,
    Replace,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from retinue.testing import (
    InvariantError,
    check_history_replay,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.unit.test_checks import DONE, TRIGGER, good_log, log, text


def test_check_no_dangling_tool_calls_call_without_result() -> None:
    """R9.25: a closed step's tool call with no result is dangling."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("a", "t", "{}"), ToolCall("b", "t", "{}"))),
        ToolCallEvent(1, 1, "a", "t", "{}"),
        ToolResultEvent(1, 1, "a", text("ok")),
        StepEnd(1, 1),
        TurnEnd(1, DONE),
    )
    with pytest.raises(InvariantError, match=r"seq 5 .*R9\.25.*'b'"):
        check_no_dangling_tool_calls(events)
    with pytest.raises(InvariantError, match=r"R9\.25"):
        check_session_invariants(events)


def test_check_no_dangling_tool_calls_duplicate_result() -> None:
    """R9.25: a tool call gets exactly one result, never two."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("a", "t", "{}"),)),
        ToolCallEvent(1, 1, "a", "t", "{}"),
        ToolResultEvent(1, 1, "a", text("ok")),
        ToolResultEvent(1, 1, "a", text("again")),
        StepEnd(1, 1),
    )
    with pytest.raises(InvariantError, match=r"seq 5 .*R9\.25.*seq 4"):
        check_no_dangling_tool_calls(events)


def test_check_no_dangling_tool_calls_result_must_come_before_step_end() -> None:
    """R9.25: a result logged after its step closed does not answer the call."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("a", "t", "{}"),)),
        ToolCallEvent(1, 1, "a", "t", "{}"),
        StepEnd(1, 1),
        StepStart(1, 2),
        ToolResultEvent(1, 2, "a", text("late")),
        StepEnd(1, 2),
    )
    with pytest.raises(InvariantError, match=r"seq 4 .*R9\.25"):
        check_no_dangling_tool_calls(events)


def test_check_no_dangling_tool_calls_unclosed_step_is_settled_at_turn_end() -> None:
    """R9.25: a step cut off by turn/end must still have answered its calls."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("a", "t", "{}"),)),
        TurnEnd(1, DONE),
    )
    with pytest.raises(InvariantError, match=r"seq 3 .*R9\.25"):
        check_no_dangling_tool_calls(events)


def test_check_no_dangling_tool_calls_ignores_a_step_still_open() -> None:
    """R9.25: a step still streaming or running tools at the end of the log is not judged."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("a", "t", "{}"),)),
    )
    check_no_dangling_tool_calls(events)


def answered_step(turn: int, step: int, *tail: EventData) -> tuple[EventData, ...]:
    """One step of *turn* that calls ``c1`` and answers it, then *tail* before its step/end."""
    return (
        StepStart(turn, step),
        AssistantMessage(turn, step, (ToolCall("c1", "t", "{}"),)),
        ToolCallEvent(turn, step, "c1", "t", "{}"),
        ToolResultEvent(turn, step, "c1", text("ok")),
        *tail,
        StepEnd(turn, step),
    )


def test_check_session_invariants_r4_15_result_in_a_later_step_of_the_turn() -> None:
    """R4.15: a result answers a call of its own step; a call answered earlier is not re-asked."""
    events = log(
        TurnStart(1, TRIGGER),
        *answered_step(1, 1),
        StepStart(1, 2),
        ToolResultEvent(1, 2, "c1", text("again")),
        StepEnd(1, 2),
        TurnEnd(1, DONE),
    )
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(
            InvariantError, match=r"seq 7 .*R4\.15.*'c1'.*has no tool/call in step 2"
        ):
            check(events)


def test_check_session_invariants_r4_15_result_in_a_later_turn() -> None:
    """R4.15: a result in a later turn does not answer a call of an earlier turn."""
    events = log(
        TurnStart(1, TRIGGER),
        *answered_step(1, 1),
        TurnEnd(1, DONE),
        TurnStart(2, TRIGGER),
        StepStart(2, 1),
        ToolResultEvent(2, 1, "c1", text("again")),
        StepEnd(2, 1),
        TurnEnd(2, DONE),
    )
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(
            InvariantError, match=r"seq 9 .*R4\.15.*'c1'.*has no tool/call in step 1"
        ):
            check(events)


def test_check_session_invariants_r4_15_second_result_in_the_same_step() -> None:
    """R4.15: every tool call has exactly one result; a second one is rejected."""
    events = log(
        TurnStart(1, TRIGGER),
        *answered_step(1, 1, ToolResultEvent(1, 1, "c1", text("again"))),
        TurnEnd(1, DONE),
    )
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(InvariantError, match=r"seq 5 .*R4\.15.*'c1'.*already answered"):
            check(events)


def test_check_session_invariants_r4_15_tool_call_record_without_result() -> None:
    """R4.15: a tool/call record gets its result before its step/end."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("c9", "t", "{}"),)),
        ToolCallEvent(1, 1, "c9", "t", "{}"),
        StepEnd(1, 1),
        TurnEnd(1, DONE),
    )
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(InvariantError, match=r"seq 4 .*R4\.15.*'c9' \(seq 3\) has no result"):
            check(events)


def test_check_session_invariants_accepts_a_call_id_reused_in_a_later_step() -> None:
    """R4.15: a model may reuse a call id in a new step; each call gets its own one result."""
    events = log(
        TurnStart(1, TRIGGER), *answered_step(1, 1), *answered_step(1, 2), TurnEnd(1, DONE)
    )
    check_session_invariants(events)
    check_history_replay(events)


def test_check_no_dangling_tool_calls_unclosed_step_is_settled_at_the_next_step() -> None:
    """R9.25: a step cut off by the next step/start must still have answered its calls."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("a", "t", "{}"),)),
        StepStart(1, 2),
        AssistantMessage(1, 2, text("done")),
        StepEnd(1, 2),
        TurnEnd(1, DONE),
    )
    with pytest.raises(InvariantError, match=r"seq 3 .*R9\.25.*'a' \(seq 2\) has no result"):
        check_no_dangling_tool_calls(events)


def duplicate_call_step(results: int) -> list[Event]:
    """A step whose two tool calls share the id ``c1``, with *results* results for it."""
    tail = [(ToolResultEvent(1, 1, "c1", text(f"r{i}")), [3 + i]) for i in range(results)]
    return two_call_step(*tail, ids=("c1", "c1"))


@pytest.mark.parametrize("results", [1, 2])
def test_check_session_invariants_r4_15_duplicate_call_id_in_a_step(results: int) -> None:
    """R4.15: a call id names one call of its step; however it is answered, a repeat fails."""
    events = duplicate_call_step(results)
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(InvariantError, match=r"seq 4 .*R4\.15.*'c1'.*duplicate call id"):
            check(events)
    with pytest.raises(InvariantError, match=r"seq 2 .*R4\.15.*'c1'.*duplicate call id"):
        check_no_dangling_tool_calls(events)


def test_check_history_replay_r5_4_call_block_without_result() -> None:
    """R5.4: a closed step's tool-call block with no tool/call and no result fails the replay."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)),
        StepEnd(1, 1),
        TurnEnd(1, DONE),
    )
    with pytest.raises(InvariantError, match=r"seq 2\).*R5\.4.*'c1' has no result"):
        check_history_replay(events)


def test_check_history_replay_r4_15_call_unanswered_when_the_next_step_starts() -> None:
    """R4.15: a tool/call still pending at the next step/start is reported there."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)),
        ToolCallEvent(1, 1, "c1", "t", "{}"),
        StepEnd(1, 1),
        StepStart(1, 2),
        AssistantMessage(1, 2, text("done")),
        StepEnd(1, 2),
        TurnEnd(1, DONE),
    )
    with pytest.raises(InvariantError, match=r"seq 4 .*R4\.15.*'c1' \(seq 3\) has no result"):
        check_history_replay(events)


def test_check_history_replay_r5_4_result_before_the_message_that_calls_it() -> None:
    """R5.4: in the replayed history a tool result follows the assistant message calling it."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        ToolCallEvent(1, 1, "c1", "t", "{}"),
        (ToolResultEvent(1, 1, "c1", text("ok")), [2]),
        AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)),
        StepEnd(1, 1),
        TurnEnd(1, DONE),
    )
    with pytest.raises(InvariantError, match=r"seq 3\).*R5\.4.*result 'c1' answers no"):
        check_history_replay(events)


def test_check_history_replay_r5_4_replace_that_drops_a_result() -> None:
    """R5.4: a surface replace that drops a call's result leaves the call unanswered."""
    events = good_log()
    summary = Event(
        len(events) - 1,
        0,
        UserMessage(text("summary")),
        source_event_seqs=(7,),
        surface_op=Replace(7, 7),
    )
    events.insert(len(events) - 1, summary)
    events[-1] = events[-1]._replace(seq=len(events) - 1)
    with pytest.raises(InvariantError, match=r"seq 5\).*R5\.4.*'c1' has no result"):
        check_history_replay(events)


def test_check_history_replay_accepts_calls_of_a_step_still_open() -> None:
    """R4.17: a live log may end while its open step's calls wait for their results."""
    events = good_log()[:7]
    check_history_replay(events)


def two_call_step(
    *tail: EventData | tuple[EventData, Sequence[int]], ids: tuple[str, str] = ("a", "b")
) -> list[Event]:
    """A turn whose step asks for two calls, *ids* (tool/calls at seqs 3, 4), then *tail*."""
    first, second = ids
    return log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, (ToolCall(first, "t", "{}"), ToolCall(second, "t", "{}"))),
        ToolCallEvent(1, 1, first, "t", "{}"),
        ToolCallEvent(1, 1, second, "t", "{}"),
        *tail,
        StepEnd(1, 1),
        TurnEnd(1, DONE),
    )


def test_check_session_invariants_r9_17_results_follow_model_order() -> None:
    """R9.17, R5.4: a result logged after that of a call the model made later is refused."""
    events = two_call_step(
        (ToolResultEvent(1, 1, "b", text("b")), [4]), (ToolResultEvent(1, 1, "a", text("a")), [3])
    )
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(InvariantError, match=r"seq 6 .*R9\.17.*'a' \(call 0.*'b' \(call 1"):
            check(events)


@pytest.mark.parametrize("sources", [[4], [3, 4], [2]])
def test_check_session_invariants_r9_17_result_points_at_its_own_tool_call(sources) -> None:
    """R9.17, R11.9: a result's source_event_seqs are exactly its own tool/call's seq."""
    events = two_call_step(
        (ToolResultEvent(1, 1, "a", text("a")), sources),
        (ToolResultEvent(1, 1, "b", text("b")), [4]),
    )
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(InvariantError, match=r"seq 5 .*R9\.17.*'a'.*not \[3\]"):
            check(events)


def test_check_session_invariants_r9_17_accepts_what_the_scheduler_may_log() -> None:
    """R9.17, R9.21, R11.9: interleaved calls, synthetic and unsourced results still pass.

    A later call's ``tool/call`` may precede an earlier result; a call never
    started gets its ``tool/call`` and synthetic result after the earlier
    results; crash repair may not know a result's source.
    """
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        AssistantMessage(1, 1, tuple(ToolCall(i, "t", "{}") for i in ("a", "b", "c"))),
        ToolCallEvent(1, 1, "a", "t", "{}"),
        ToolCallEvent(1, 1, "b", "t", "{}"),
        (ToolResultEvent(1, 1, "a", text("a")), [3]),
        ToolResultEvent(1, 1, "b", text("interrupted")),
        ToolCallEvent(1, 1, "c", "t", "{}"),
        (ToolResultEvent(1, 1, "c", text("aborted before it started")), [7]),
        StepEnd(1, 1),
        TurnEnd(1, DONE),
    )
    check_session_invariants(events)
    check_history_replay(events)


def test_check_session_invariants_accepts_context_injected_between_results() -> None:
    """R2.17, R9.18: ``inject`` during a turn logs context wherever the turn is, results included.

    R9.18 keeps the contexts the scheduler collects after every result, but the
    log cannot tell them from an injected one, so the checkers accept both.
    """
    events = two_call_step(
        (ToolResultEvent(1, 1, "a", text("a")), [3]),
        ContextMessage(text("injected")),
        (ToolResultEvent(1, 1, "b", text("b")), [4]),
    )
    check_session_invariants(events)
    check_history_replay(events)
