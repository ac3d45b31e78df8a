"""A session holds its log to the step rules (R4.13, R4.14, R4.16) as it does the turn rules.

Steps open inside their turn, never overlap and are numbered 1, 2, ... in each
turn; a turn closes with no step open; every event stamped with a step lies
in that step while it is open. An append breaking one is refused with nothing
logged or heard, and a stored or seeded log breaking one does not load.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from retinue import Text, ToolCall
from retinue._errors import CorruptSessionError, SessionError
from retinue.providers import TextDelta
from retinue.session import (
    AssistantChunk,
    AssistantMessage,
    Event,
    EventData,
    Replace,
    Session,
    SessionHeader,
    SteeringMessage,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.stores import JSONLStore
from retinue.testing import check_session_invariants
from tests.stores._kit import run_turn

TEXT = (Text("x"),)


def _turn(*steps: int) -> Session:
    """A session with turn 1 open, after steps 1..n-1 closed and step n open (none if empty)."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    for step in steps:
        session.append(StepStart(1, step))
    return session


def _append(session: Session, data: EventData) -> None:
    if isinstance(data, AssistantMessage | ToolResultEvent | SteeringMessage):
        session.append(data, surface="append")
    else:
        session.append(data)


def _refused(session: Session, data: EventData, code: str, message: str) -> None:
    heard: list[Event] = []
    session.observe(heard.append)
    logged = len(session.events)
    with pytest.raises(SessionError) as caught:
        _append(session, data)
    assert (caught.value.code, str(caught.value)) == (code, message)
    assert (len(session.events), heard) == (logged, [])


def test_a_step_end_closes_only_the_open_step() -> None:
    """R4.14: step/end matches the open step; with none open it closes nothing."""
    _refused(
        _turn(),
        StepEnd(1, 1),
        "STEP_MISMATCH",
        "step/end (1, 1) does not close a step: no step is open",
    )
    session = _turn(1)
    _refused(
        session,
        StepEnd(1, 2),
        "STEP_MISMATCH",
        "step/end (1, 2) does not close a step: the open step is (1, 1)",
    )
    session.append(StepEnd(1, 1))
    _refused(
        session,
        StepEnd(1, 1),
        "STEP_MISMATCH",
        "step/end (1, 1) does not close a step: no step is open",
    )


def test_steps_never_overlap_and_are_numbered_from_one_in_each_turn() -> None:
    """R4.14, R4.16: a step opens only between steps, numbered one past the last."""
    session = _turn(1)
    _refused(session, StepStart(1, 2), "STEP_OVERLAP", "step/start 2 while step 1 is open")
    session.append(StepEnd(1, 1))
    _refused(
        session,
        StepStart(1, 3),
        "STEP_NUMBER",
        "step/start 3 does not follow step 1: steps are numbered 1, 2, ... in each turn "
        "(the next is 2)",
    )
    session.append(StepStart(1, 2))
    session.append(StepEnd(1, 2))
    session.append(TurnEnd(1, TurnEndReason.completed()))
    session.append(TurnStart(2, TurnTrigger("message")))
    session.append(StepStart(2, 1))  # numbering restarts


def test_a_step_opens_only_inside_its_own_turn() -> None:
    """R4.13, R4.14: no step outside a turn, nor one stamped with another turn."""
    _refused(
        Session.create("s"),
        StepStart(1, 1),
        "STEP_MISMATCH",
        "step/start of turn 1 while no turn is open",
    )
    _refused(_turn(), StepStart(2, 1), "STEP_MISMATCH", "step/start of turn 2 inside turn 1")


def test_a_turn_closes_with_no_step_open() -> None:
    """R4.14: step/end precedes turn/end."""
    _refused(
        _turn(1),
        TurnEnd(1, TurnEndReason.completed()),
        "STEP_OPEN",
        "turn/end 1 while step 1 is open: step/end comes first",
    )


STAMPED: dict[str, Callable[[int, int], EventData]] = {
    "assistant/chunk": lambda turn, step: AssistantChunk(turn, step, TextDelta(0, "x")),
    "assistant/message": lambda turn, step: AssistantMessage(turn, step, TEXT),
    "tool/call": lambda turn, step: ToolCallEvent(turn, step, "c", "t", "{}"),
    "tool/result": lambda turn, step: ToolResultEvent(turn, step, "c", TEXT),
}


@pytest.mark.parametrize("kind", list(STAMPED))
def test_an_event_stamped_with_a_step_lies_inside_that_step(kind: str) -> None:
    """R4.14: chunks, messages, calls and results of a step come while it is open."""
    build = STAMPED[kind]
    _refused(_turn(), build(1, 1), "STEP_MISMATCH", f"{kind} of step (1, 1) while no step is open")
    session = _turn(1)
    _refused(
        session,
        build(1, 2),
        "STEP_MISMATCH",
        f"{kind} of step (1, 2) while the open step is (1, 1)",
    )
    # What the step logs before a call or a result (R9.10, R4.15): the message listing the call.
    if kind in ("tool/call", "tool/result"):
        _append(session, AssistantMessage(1, 1, (ToolCall("c", "t", "{}"),)))
    if kind == "tool/result":
        _append(session, ToolCallEvent(1, 1, "c", "t", "{}"))
    _append(session, build(1, 1))


def test_steering_belongs_to_the_open_turn() -> None:
    """R4.13: a steering message is logged in the turn it steers."""
    _refused(
        _turn(),
        SteeringMessage(2, TEXT),
        "TURN_MISMATCH",
        "steering/message of turn 2 inside turn 1",
    )


def test_a_replace_keeps_the_stamps_of_what_it_rewrites_outside_any_step() -> None:
    """R4.20, R7.19: a rewrite of history is logged between steps with its old stamps."""
    session = _turn(1)
    message = session.append(AssistantMessage(1, 1, TEXT), surface="append")
    session.append(StepEnd(1, 1))
    session.append(
        AssistantMessage(1, 1, (Text("summary"),)),
        surface=Replace(message.seq, message.seq),
        source_event_seqs=(message.seq,),
    )
    session.append(TurnEnd(1, TurnEndReason.completed()))
    check_session_invariants(session.events)


def test_a_seed_breaking_a_step_rule_is_refused_naming_its_seq() -> None:
    """R4.24: a seed is validated like appends, the step rules included."""
    source = Session.create("s")
    run_turn(source)
    events = list(source.events)
    at = next(i for i, event in enumerate(events) if isinstance(event.data, StepEnd))
    events[at] = Event(at, events[at].time, StepEnd(1, 5))
    with pytest.raises(SessionError) as caught:
        Session.from_events(SessionHeader("r", 0), events)
    assert caught.value.code == "STEP_MISMATCH"
    assert str(caught.value) == (
        f"event seq {at} (step/end): step/end (1, 5) does not close a step: the open step is (1, 1)"
    )


def _break_a_step_end(root: Path) -> int:
    """Make the stored log's first step/end close step 5; returns its seq."""
    [path] = root.glob("*/*.jsonl")
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"step/end"' in line)
    record = json.loads(lines[at])
    record["data"]["step"] = 5
    lines[at] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    seq: int = record["seq"]
    return seq


async def test_a_stored_log_breaking_a_step_rule_does_not_load(tmp_path: Path) -> None:
    """R4.14, R11.2: a stored step/end of no open step is a corrupt log, named by its seq."""
    session = Session.create("s1")
    run_turn(session)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.detach(session)
    seq = _break_a_step_end(tmp_path)
    async with JSONLStore(tmp_path) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("s1")
    assert f"event seq {seq} (step/end): step/end (1, 5) does not close a step" in str(caught.value)


def test_a_user_message_needs_no_step() -> None:
    """R4.14 stamps only what a step produces: a prompt is logged between steps."""
    session = _turn()
    session.append(UserMessage(TEXT), surface="append")
