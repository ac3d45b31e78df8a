"""Session-log invariant checkers: good logs pass, each broken rule is named with its seq."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

import pytest
import trio

import retinue
from retinue._content import Text, ToolCall, ToolResultBlock
from retinue._request import LlmCallConfig, MessageHistory
from retinue._stream import TextDelta
from retinue.session import (
    SURFACE_TYPES,
    AssistantChunk,
    AssistantMessage,
    ContextMessage,
    EpochHeader,
    Event,
    EventData,
    Replace,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SteeringMessage,
    StepEnd,
    StepStart,
    SurfaceOp,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.testing import (
    CallTools,
    InvariantError,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_history_replay,
    check_no_dangling_tool_calls,
    check_session_invariants,
)

TRIGGER = TurnTrigger("message")
DONE = TurnEndReason.completed()
HEADER = RequestHeader(EpochHeader(LlmCallConfig("m")), "initial")


def text(value: str) -> tuple[Text]:
    return (Text(value),)


def log(*items: EventData | tuple[EventData, Sequence[int]]) -> list[Event]:
    """Events with seq = index; surface types append; a tuple adds source_event_seqs."""
    events = []
    for seq, item in enumerate(items):
        # type() rather than isinstance(): an AssistantChunk is a named tuple.
        if type(item) is tuple:
            data, sources = cast("tuple[EventData, Sequence[int]]", item)
        else:
            data, sources = cast("EventData", item), None
        surface: SurfaceOp | None = "append" if data.type in SURFACE_TYPES else None
        events.append(Event(seq, 0, data, None if sources is None else tuple(sources), surface))
    return events


def good_log() -> list[Event]:
    """Two turns: a tool step and an answer step, then an empty turn."""
    return log(
        TurnStart(1, TRIGGER),
        UserMessage(text("hello")),
        StepStart(1, 1),
        HEADER,
        AssistantChunk(1, 1, TextDelta(0, "x")),
        (AssistantMessage(1, 1, (Text("x"), ToolCall("c1", "t", "{}"))), [4]),
        ToolCallEvent(1, 1, "c1", "t", "{}"),
        (ToolResultEvent(1, 1, "c1", text("ok")), [6]),
        StepEnd(1, 1),
        SteeringMessage(1, text("steer")),
        StepStart(1, 2),
        RequestHeaderDelta(config=LlmCallConfig("m2")),
        AssistantMessage(1, 2, text("done")),
        StepEnd(1, 2),
        TurnEnd(1, DONE),
        TurnStart(2, TRIGGER),
        TurnEnd(2, DONE),
    )


def replace(events: list[Event], seq: int, data: EventData) -> list[Event]:
    changed = list(events)
    changed[seq] = changed[seq]._replace(data=data)
    return changed


def test_check_session_invariants_accepts_a_well_formed_log() -> None:
    """R4.13-R4.22, R9.25: a well-formed two-turn log passes every check."""
    events = good_log()
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)


def test_check_session_invariants_accepts_a_log_ending_inside_a_turn() -> None:
    """R4.17: a live log may end with a turn (and a step with pending calls) still open."""
    events = good_log()[:7]
    check_session_invariants(events)


def test_check_session_invariants_r4_2_seq_must_equal_index() -> None:
    """R4.2: seq equals the index in the log."""
    events = good_log()
    events[3] = events[3]._replace(seq=4)
    with pytest.raises(InvariantError, match=r"seq 4 .*R4\.2"):
        check_session_invariants(events)


@pytest.mark.parametrize("seq", [True, 1.0, "1"])
def test_check_session_invariants_r4_2_seq_is_an_int(seq: object) -> None:
    """R4.2: a seq equal to its index but no int (a store writes ``true``, ``1.0``) is flagged."""
    events = good_log()
    events[1] = events[1]._replace(seq=cast("int", seq))
    with pytest.raises(InvariantError, match=rf"R4\.2: seq {re.escape(repr(seq))} at index 1"):
        check_session_invariants(events)


def test_check_session_invariants_r4_6_surface_ops_where_required_only() -> None:
    """R4.6: surface types carry a surface op; other types never do."""
    missing = good_log()
    missing[1] = missing[1]._replace(surface_op=None)
    with pytest.raises(InvariantError, match=r"seq 1 .*R4\.6"):
        check_session_invariants(missing)
    extra = good_log()
    extra[2] = extra[2]._replace(surface_op="append")
    with pytest.raises(InvariantError, match=r"seq 2 .*R4\.6"):
        check_session_invariants(extra)


def test_check_session_invariants_r4_13_event_before_any_turn() -> None:
    """R4.13: nothing precedes the first turn/start."""
    events = log(HEADER, TurnStart(1, TRIGGER), TurnEnd(1, DONE))
    with pytest.raises(InvariantError, match=r"seq 0 .*R4\.13"):
        check_session_invariants(events)


def test_check_session_invariants_r4_13_event_between_turns() -> None:
    """R4.13: no event lies between a turn/end and the next turn/start."""
    events = log(
        TurnStart(1, TRIGGER), TurnEnd(1, DONE), UserMessage(text("late")), TurnStart(2, TRIGGER)
    )
    with pytest.raises(InvariantError, match=r"seq 2 .*R4\.13"):
        check_session_invariants(events)


def test_check_session_invariants_r4_13_turn_end_without_open_turn() -> None:
    """R4.13: a turn/end needs an open turn."""
    events = log(TurnStart(1, TRIGGER), TurnEnd(1, DONE), TurnEnd(1, DONE))
    with pytest.raises(InvariantError, match=r"seq 2 .*R4\.13"):
        check_session_invariants(events)


def test_check_session_invariants_r4_13_steering_for_another_turn() -> None:
    """R4.13: a steering message is stamped with the open turn."""
    events = replace(good_log(), 9, SteeringMessage(2, text("steer")))
    with pytest.raises(InvariantError, match=r"seq 9 .*R4\.13"):
        check_session_invariants(events)


def test_check_session_invariants_r4_14_overlapping_turns() -> None:
    """R4.14: a turn/start while a turn is open is an overlap."""
    events = log(TurnStart(1, TRIGGER), TurnStart(2, TRIGGER))
    with pytest.raises(InvariantError, match=r"seq 1 .*R4\.14"):
        check_session_invariants(events)


def test_check_session_invariants_r4_14_turn_end_must_match_open_turn() -> None:
    """R4.14: turn/end.turn equals the open turn."""
    events = replace(good_log(), 14, TurnEnd(3, DONE))
    with pytest.raises(InvariantError, match=r"seq 14 .*R4\.14"):
        check_session_invariants(events)


def test_check_session_invariants_r4_14_overlapping_steps() -> None:
    """R4.14: steps never overlap."""
    events = log(TurnStart(1, TRIGGER), StepStart(1, 1), StepStart(1, 2))
    with pytest.raises(InvariantError, match=r"seq 2 .*R4\.14"):
        check_session_invariants(events)


def test_check_session_invariants_r4_14_step_of_another_turn() -> None:
    """R4.14: steps nest inside the open turn."""
    events = log(TurnStart(1, TRIGGER), StepStart(2, 1))
    with pytest.raises(InvariantError, match=r"seq 1 .*R4\.14"):
        check_session_invariants(events)


def test_check_session_invariants_r4_14_step_end_must_match() -> None:
    """R4.14: step/end matches the open step, and needs one."""
    wrong = replace(good_log(), 8, StepEnd(1, 2))
    with pytest.raises(InvariantError, match=r"seq 8 .*R4\.14"):
        check_session_invariants(wrong)
    unopened = log(TurnStart(1, TRIGGER), StepEnd(1, 1))
    with pytest.raises(InvariantError, match=r"seq 1 .*R4\.14"):
        check_session_invariants(unopened)


def test_check_session_invariants_r4_14_closed_turn_has_no_open_step() -> None:
    """R4.14: step/end precedes turn/end."""
    events = log(TurnStart(1, TRIGGER), StepStart(1, 1), TurnEnd(1, DONE))
    with pytest.raises(InvariantError, match=r"seq 2 .*R4\.14"):
        check_session_invariants(events)


def test_check_session_invariants_r4_14_chunks_follow_their_step_start() -> None:
    """R4.14: step/start precedes its chunks; a chunk outside or stamped for another step fails."""
    outside = log(TurnStart(1, TRIGGER), AssistantChunk(1, 1, TextDelta(0, "x")))
    with pytest.raises(InvariantError, match=r"seq 1 .*R4\.14"):
        check_session_invariants(outside)
    mismatched = replace(good_log(), 4, AssistantChunk(1, 2, TextDelta(0, "x")))
    with pytest.raises(InvariantError, match=r"seq 4 .*R4\.14"):
        check_session_invariants(mismatched)


def test_check_session_invariants_r4_15_result_needs_an_earlier_call() -> None:
    """R4.15: every tool/result has an earlier tool/call with the same call id."""
    events = good_log()
    events[6], events[7] = events[7]._replace(seq=6), events[6]._replace(seq=7)
    events[6] = events[6]._replace(source_event_seqs=None)
    with pytest.raises(InvariantError, match=r"seq 6 .*R4\.15"):
        check_session_invariants(events)


def test_check_session_invariants_r4_16_turn_numbers_increase_by_one() -> None:
    """R4.16: each turn is the previous turn/start's number plus one, starting at 1."""
    skipped = replace(good_log(), 15, TurnStart(3, TRIGGER))
    with pytest.raises(InvariantError, match=r"seq 15 .*R4\.16"):
        check_session_invariants(skipped)
    first = log(TurnStart(2, TRIGGER))
    with pytest.raises(InvariantError, match=r"seq 0 .*R4\.16"):
        check_session_invariants(first)


def test_check_session_invariants_r4_16_steps_restart_at_one_each_turn() -> None:
    """R4.16: step numbers start at 1 in every turn and count up."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        StepEnd(1, 1),
        TurnEnd(1, DONE),
        TurnStart(2, TRIGGER),
        StepStart(2, 2),
    )
    with pytest.raises(InvariantError, match=r"seq 5 .*R4\.16"):
        check_session_invariants(events)


def test_check_session_invariants_r4_18_no_header_delta_before_a_header() -> None:
    """R4.18: request/header-delta never precedes the first request/header."""
    events = replace(good_log(), 3, RequestHeaderDelta(system=None))
    with pytest.raises(InvariantError, match=r"seq 3 .*R4\.18"):
        check_session_invariants(events)


@pytest.mark.parametrize(
    "sources", [(), (6, 6), (7,), (9,), (-1,), (True,), (5.0,), ("5",), (5, "6")]
)
def test_check_session_invariants_r4_22_source_seqs_nonempty_unique_earlier(sources) -> None:
    """R4.22: source_event_seqs are non-empty, duplicate-free and reference earlier events."""
    events = good_log()
    events[7] = events[7]._replace(source_event_seqs=sources)
    with pytest.raises(InvariantError, match=r"seq 7 .*R4\.22"):
        check_session_invariants(events)


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


def test_check_history_replay_accepts_a_log_with_a_surface_replace() -> None:
    """R5.6: a replayed session derives the same history as a fresh fold, replaces included."""
    events = good_log()
    compacted = Event(
        len(events) - 1,
        0,
        UserMessage(text("summary")),
        source_event_seqs=(1, 5, 7),
        surface_op=Replace(1, 7),
    )
    events.insert(len(events) - 1, compacted)
    events[-1] = events[-1]._replace(seq=len(events) - 1)
    check_history_replay(events)
    session = Session.from_events(Session.create("s").header, events)
    contents = [m.content for m in session.derive_messages()]
    assert len(contents) == 3
    assert (contents[0], contents[2]) == ((Text("summary"),), (Text("done"),))


def test_check_history_replay_reports_an_unreplayable_log() -> None:
    """R5.6: a log the session refuses to rebuild fails the replay check."""
    events = log(UserMessage(text("outside any turn")))
    with pytest.raises(InvariantError, match=r"R5\.6"):
        check_history_replay(events)


def test_check_history_replay_detects_a_diverging_derivation(monkeypatch) -> None:
    """R5.6: if derive_messages disagrees with a fresh fold, the check fails."""
    monkeypatch.setattr(Session, "derive_messages", lambda _self: MessageHistory([]))
    with pytest.raises(InvariantError, match="differs"):
        check_history_replay(good_log())


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
        AssistantMessage(1, 1, text("no tool-call block")),
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


@retinue.tool
async def pause(seconds: float) -> str:
    """Sleep, then answer.

    Args:
        seconds: how long to sleep.
    """
    await trio.sleep(seconds)
    return "paused"


async def test_check_session_invariants_passes_a_runtime_log_with_context_between_results(
    autojump_clock,
) -> None:
    """R2.17, R9.17: a context injected while the second of two calls runs lands between results."""
    calls = CallTools([ToolCallSpec("pause", '{"seconds": 1}')] * 2)
    model = ScriptedModel([calls, Reply("done")])
    async with retinue.open_runtime(models=model, tools=[pause]) as rt:
        agent = await rt.create_agent("a", retinue.AgentOptions(model="m"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.ask, "go")
            await trio.sleep(1.5)
            agent.inject("while the second call runs")
        events = agent.session.events
    types = [event.type for event in events if event.type in ("tool/result", "context/message")]
    assert types == ["tool/result", "context/message", "tool/result"]
    check_session_invariants(events)
    check_history_replay(events)


def pruned_log(pruned: EventData) -> list[Event]:
    """A tool step in turn 1; in turn 2, before its step (R7.19), a surface replace of the
    result of turn 1 (seq 6) by *pruned*, then a step that answers."""
    session = Session.create("pruned")
    session.append(TurnStart(1, TRIGGER))
    session.append(UserMessage(text("hello")), surface="append")
    session.append(StepStart(1, 1))
    session.append(AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)), surface="append")
    session.append(ToolCallEvent(1, 1, "c1", "t", "{}"))
    session.append(ToolResultEvent(1, 1, "c1", text("a long output")), surface="append")
    assert session.events[-1].seq == 5
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, DONE))
    session.append(TurnStart(2, TRIGGER))
    session.append(UserMessage(text("again")), surface="append")
    session.append(pruned, surface=Replace(5, 5), source_event_seqs=(5,))
    session.append(StepStart(2, 1))
    session.append(AssistantMessage(2, 1, text("done")), surface="append")
    session.append(StepEnd(2, 1))
    session.append(TurnEnd(2, DONE))
    return list(session.events)


@pytest.mark.parametrize(
    "pruned",
    [
        ToolResultEvent(1, 1, "c1", text("[pruned]")),
        ToolResultEvent(2, 0, "c1", text("[pruned]")),
    ],
    ids=["stamped-as-the-original", "stamped-with-the-open-turn"],
)
def test_checkers_accept_a_tool_result_rewritten_by_a_surface_replace(
    pruned: ToolResultEvent,
) -> None:
    """R4.19, R4.20, R7.19: pruning rewrites a tool result as a shorter ``tool/result`` of the
    same call (keeping the call paired in history) by a surface replace, logged in
    ``agent/pre-step``, outside any step. The rewrite is no second result of the call's step
    (R4.15, R9.17, R9.25): it only has to name a call made earlier."""
    events = pruned_log(pruned)
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)
    history = Session.from_events(Session.create("s").header, events).derive_messages()
    assert history[2].content[0] == ToolResultBlock("c1", text("[pruned]"), False)


def test_checkers_accept_an_assistant_message_rewritten_by_a_surface_replace() -> None:
    """R4.19, R4.20, R7.19: a replace that rewrites an assistant message (keeping its call)
    outside any step is no message of a step: its stamps are the original's."""
    session_events = pruned_log(ToolResultEvent(1, 1, "c1", text("[pruned]")))
    rewritten = AssistantMessage(1, 1, (Text("shorter"), ToolCall("c1", "t", "{}")))
    events = [
        *session_events[:10],
        Event(10, 0, rewritten, (3,), Replace(3, 3)),
        *session_events[11:],
    ]
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)


def test_check_session_invariants_r4_15_a_rewritten_result_names_an_earlier_call() -> None:
    """R4.15: a ``tool/result`` that rewrites another by a surface replace still needs an
    earlier ``tool/call`` of its call id."""
    events = pruned_log(ToolResultEvent(1, 1, "c9", text("[pruned]")))
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(InvariantError, match=r"seq 10 .*R4\.15.*'c9'"):
            check(events)


async def test_checkers_pass_a_runtime_log_pruned_in_agent_pre_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.20, R7.19, R8.9: an ``agent/pre-step`` listener prunes the tool results of earlier
    turns as the sanctioned place to rewrite history; the log passes every checker and the
    model gets the pruned results."""
    calls = CallTools([ToolCallSpec("pause", '{"seconds": 1}')])
    model = ScriptedModel([calls, Reply("one"), Reply("two")])

    pruned: set[int] = set()

    def prune(handle: retinue.Agent, turn: int, *_rest: object) -> None:
        session = handle.session
        for event in list(session.events):
            data = event.data
            if isinstance(data, ToolResultEvent) and data.turn < turn and event.seq not in pruned:
                pruned.add(event.seq)
                rewrite = ToolResultEvent(data.turn, data.step, data.call_id, text("[pruned]"))
                session.append(
                    rewrite, surface=Replace(event.seq, event.seq), source_event_seqs=(event.seq,)
                )

    with trio.fail_after(60):
        async with retinue.open_runtime(models=model, tools=[pause]) as rt:
            rt.hooks.on("agent/pre-step", prune)
            agent = await rt.create_agent("a", retinue.AgentOptions(model="m"))
            await agent.ask("go")
            await agent.ask("again")
            events = agent.session.events
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)
    results = [
        b for m in model.requests[-1].messages for b in m.content if isinstance(b, ToolResultBlock)
    ]
    assert [r.content for r in results] == [text("[pruned]")]
