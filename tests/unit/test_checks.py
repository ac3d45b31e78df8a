"""Session-log invariant checkers: good logs pass, each broken rule is named with its seq.

The structure of a log: seqs, surface ops, turns and steps, their numbers, request headers
and sources (R4.2-R4.22); a log the history replay check refuses (R5.6)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

import pytest

from retinue._content import Text, ToolCall
from retinue._request import LlmCallConfig, MessageHistory, ToolSchema
from retinue._stream import TextDelta
from retinue.session import (
    SURFACE_TYPES,
    AssistantChunk,
    AssistantMessage,
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
    SystemEdit,
    ToolCallEvent,
    ToolResultEvent,
    ToolsDelta,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.testing import (
    InvariantError,
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


@pytest.mark.parametrize(
    ("turn", "step", "shown"),
    [
        (True, 1, "(True, 1)"),
        (1, 1.0, "(1, 1.0)"),
        (10**5000, 1, "a tuple holding an integer too long to show"),
    ],
    ids=["bool turn", "float step", "long turn"],
)
def test_check_session_invariants_r4_14_a_chunk_is_stamped_with_its_steps_own_ints(
    turn: int, step: int, shown: str
) -> None:
    """R4.14: a chunk's stamp names its step by the ints a session logs; one that only equals them
    (``True``, ``1.0``, which no store writes back as the step) is flagged, and one too long to show
    is flagged too, not a ValueError from formatting it."""
    events = replace(good_log(), 4, AssistantChunk(turn, step, TextDelta(0, "x")))
    with pytest.raises(InvariantError) as flagged:
        check_session_invariants(events)
    assert str(flagged.value) == (
        f"seq 4 (assistant/chunk): R4.14: stamped step {shown}, open step (1, 1)"
    )


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


SYSTEM_HEADER = RequestHeader(EpochHeader(LlmCallConfig("m"), system="one line"), "initial")


@pytest.mark.parametrize(
    "delta",
    [
        RequestHeaderDelta(system=SystemEdit(5, 0)),
        RequestHeaderDelta(tools=ToolsDelta(removed=("absent",))),
        RequestHeaderDelta(tools=ToolsDelta(changed=(ToolSchema("absent", "d", {}),))),
    ],
    ids=["system-keeps-more-lines", "removes-a-missing-tool", "changes-a-missing-tool"],
)
def test_check_session_invariants_r8_5_a_header_delta_folds_into_the_header(
    delta: RequestHeaderDelta,
) -> None:
    """R8.3, R8.5: a request/header-delta amends the folded header; one a session cannot
    fold onto it (it was not made from that header) is refused, as a session refuses it."""
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        SYSTEM_HEADER,
        StepEnd(1, 1),
        StepStart(1, 2),
        delta,
        StepEnd(1, 2),
        TurnEnd(1, DONE),
    )
    with pytest.raises(InvariantError, match=r"seq 5 \(request/header-delta\): R8\.5: "):
        check_session_invariants(events)


def test_check_session_invariants_folds_header_deltas_that_apply() -> None:
    """R8.3: deltas that fold onto the header before them pass, each onto the last fold."""
    tool = ToolSchema("lookup", "d", {})
    events = log(
        TurnStart(1, TRIGGER),
        StepStart(1, 1),
        SYSTEM_HEADER,
        StepEnd(1, 1),
        StepStart(1, 2),
        RequestHeaderDelta(system=SystemEdit(1, 0, ("two",)), tools=ToolsDelta(added=(tool,))),
        StepEnd(1, 2),
        StepStart(1, 3),
        RequestHeaderDelta(system=SystemEdit(2, 0), tools=ToolsDelta(removed=("lookup",))),
        StepEnd(1, 3),
        TurnEnd(1, DONE),
    )
    check_session_invariants(events)
