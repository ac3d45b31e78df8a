"""A session holds each step's output to the shape the loop logs (R7.34, R7.36, R9.10, R4.15, R9.17).

A step's chunks, then at most one ``assistant/message`` sourced from exactly
those chunks; a ``tool/call`` for a tool-call block of that message, made
once; one ``tool/result`` per call, pointing at it, in the message's order;
every call answered before ``step/end``; a request header before any output.
A plugin's append breaking one is refused with nothing logged, so every log a
session holds passes the invariant checks ``sessions import`` applies.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retinue import Text, ToolCall
from retinue._errors import SessionError
from retinue._request import LlmCallConfig
from retinue.providers import TextDelta
from retinue.session import (
    AssistantChunk,
    AssistantMessage,
    EpochHeader,
    Event,
    Replace,
    RequestHeader,
    Session,
    SessionHeader,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
)
from retinue.testing import check_session_invariants

TEXT = (Text("x"),)
CALLS = (ToolCall("a", "t", "{}"), ToolCall("b", "t", "{}"))


def _step() -> Session:
    """Turn 1 open with step 1 open, nothing logged in the step yet (step/start is seq 1)."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(StepStart(1, 1))
    return session


def _chunk(session: Session) -> int:
    return session.append(AssistantChunk(1, 1, TextDelta(0, "x"))).seq


def _message(session: Session, content: tuple[Text | ToolCall, ...] = CALLS) -> int:
    sources = [e.seq for e in session.events if isinstance(e.data, AssistantChunk)] or None
    return session.append(
        AssistantMessage(1, 1, content), surface="append", source_event_seqs=sources
    ).seq


def _call(session: Session, call_id: str) -> int:
    return session.append(ToolCallEvent(1, 1, call_id, "t", "{}")).seq


def _result(session: Session, call_id: str, source: int | None) -> int:
    sources = None if source is None else [source]
    return session.append(
        ToolResultEvent(1, 1, call_id, TEXT), surface="append", source_event_seqs=sources
    ).seq


def _refused(session: Session, append: Callable[[Session], object], code: str, text: str) -> None:
    before = list(session.events)
    with pytest.raises(SessionError) as caught:
        append(session)
    assert caught.value.code == code
    assert text in caught.value.message
    assert list(session.events) == before


def test_a_step_logs_one_assistant_message() -> None:
    """R7.36: a second assistant/message in a step is refused, as import refuses it."""
    session = _step()
    first = _message(session, TEXT)
    _refused(
        session,
        lambda s: _message(s, TEXT),
        "STEP_OUTPUT",
        f"a second assistant/message in the step (the first at seq {first})",
    )


def test_no_chunk_follows_the_steps_message() -> None:
    """R7.36: the message ends the step's model output."""
    session = _step()
    _chunk(session)
    message = _message(session, TEXT)
    _refused(session, _chunk, "STEP_OUTPUT", f"after the step's assistant/message (seq {message})")


@pytest.mark.parametrize(
    ("sources", "said"),
    [(None, "sourced from None"), ([2], "sourced from [2]"), ([3, 2], "sourced from [3, 2]")],
    ids=["none", "some", "out-of-order"],
)
def test_the_message_is_sourced_from_exactly_the_steps_chunks(
    sources: list[int] | None, said: str
) -> None:
    """R7.36: sourceEventSeqs are the step's chunk seqs, in order (omitted only without chunks)."""
    session = _step()
    _chunk(session)
    _chunk(session)
    _refused(
        session,
        lambda s: s.append(
            AssistantMessage(1, 1, TEXT), surface="append", source_event_seqs=sources
        ),
        "STEP_OUTPUT",
        f"{said}, not from the step's chunks [2, 3]",
    )
    _message(session, TEXT)


def test_a_message_with_no_chunk_to_source_names_none() -> None:
    """R7.36: with no chunk streamed the sources are omitted; naming any is refused."""
    session = _step()
    _refused(
        session,
        lambda s: s.append(AssistantMessage(1, 1, TEXT), surface="append", source_event_seqs=[0]),
        "STEP_OUTPUT",
        "not from the step's chunks None",
    )


def test_a_tool_call_is_one_the_steps_message_lists() -> None:
    """R9.10: each tool/call starts a tool-call block of the step's message."""
    session = _step()
    _refused(
        session,
        lambda s: _call(s, "a"),
        "STEP_OUTPUT",
        "tool/call 'a' before the step's assistant/message",
    )
    message = _message(session)
    _refused(
        session,
        lambda s: _call(s, "z"),
        "STEP_OUTPUT",
        f"tool/call 'z' not among the tool calls of the step's assistant/message (seq {message})",
    )
    _call(session, "a")
    _refused(
        session, lambda s: _call(s, "a"), "STEP_OUTPUT", "'a': the step made this call already"
    )


def test_each_call_gets_one_result_pointing_at_it() -> None:
    """R4.15, R9.17: a result answers a call of the step not yet answered, sourced from it."""
    session = _step()
    _message(session)
    _refused(
        session,
        lambda s: _result(s, "a", None),
        "CALL_RESULTS",
        "'a': the call was not made in the step",
    )
    call = _call(session, "a")
    _refused(
        session,
        lambda s: _result(s, "a", 1),
        "CALL_RESULTS",
        f"sourced from [1], not [{call}], its call",
    )
    _result(session, "a", call)
    _refused(
        session,
        lambda s: _result(s, "a", call),
        "CALL_RESULTS",
        "'a': the call is answered already",
    )


def test_results_follow_the_messages_order() -> None:
    """R9.17: results are committed in model call order."""
    session = _step()
    _message(session)
    call_a = _call(session, "a")
    call_b = _call(session, "b")
    _result(session, "b", call_b)
    _refused(
        session,
        lambda s: _result(s, "a", call_a),
        "CALL_RESULTS",
        "(call 0 of the assistant message) after the result of call 1",
    )


def test_a_step_ends_once_every_call_is_answered() -> None:
    """R4.15, R9.25: no step/end while a tool call of the step's message has no result, made
    or not (the loop logs a never-started call's call and result)."""
    session = _step()
    message = _message(session)
    call_a = _call(session, "a")
    _refused(
        session,
        lambda s: s.append(StepEnd(1, 1)),
        "CALL_RESULTS",
        f"tool call 'a' of the step's assistant/message (seq {message}) unanswered "
        f"(called at seq {call_a})",
    )
    _result(session, "a", call_a)
    _refused(
        session,
        lambda s: s.append(StepEnd(1, 1)),
        "CALL_RESULTS",
        "tool call 'b' of the step's assistant/message (seq 2) unanswered (never called)",
    )
    _result(session, "b", _call(session, "b"))
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, TurnEndReason.completed()))
    check_session_invariants(session.events)


def test_a_request_header_comes_before_the_steps_output() -> None:
    """R7.34: a header the step owes is logged before its model call."""
    header = RequestHeader(EpochHeader(LlmCallConfig("m")), "initial")
    session = _step()
    session.append(header)
    chunk = _chunk(session)
    _refused(
        session,
        lambda s: s.append(header),
        "STEP_OUTPUT",
        f"request/header after the step's model output (seq {chunk})",
    )


def test_the_next_step_starts_afresh() -> None:
    """R4.15: call ids are the step's own: the next step may use them again."""
    session = _step()
    _message(session)
    _result(session, "a", _call(session, "a"))
    _result(session, "b", _call(session, "b"))
    session.append(StepEnd(1, 1))
    session.append(StepStart(1, 2))
    _refused(
        session,
        lambda s: s.append(ToolCallEvent(1, 2, "a", "t", "{}")),
        "STEP_OUTPUT",
        "before the step's assistant/message",
    )
    session.append(AssistantMessage(1, 2, CALLS), surface="append")
    session.append(ToolCallEvent(1, 2, "a", "t", "{}"))


def test_a_loaded_step_takes_its_closing_results() -> None:
    """R11.9: a log loaded inside a step with a call unanswered takes that call's result and
    the step's end, as crash repair and a restarted driver append them; nothing else."""
    session = _step()
    _message(session)
    call_a = _call(session, "a")
    call_b = _call(session, "b")
    _result(session, "a", call_a)
    loaded = Session.from_events(SessionHeader(id="s", created_at=0), list(session.events))
    _refused(
        loaded,
        lambda s: s.append(StepEnd(1, 1)),
        "CALL_RESULTS",
        "'b' of the step's assistant/message (seq 2) unanswered (called at seq 4)",
    )
    _refused(loaded, lambda s: _result(s, "a", call_a), "CALL_RESULTS", "answered already")
    _result(loaded, "b", call_b)
    loaded.append(StepEnd(1, 1))
    loaded.append(TurnEnd(1, TurnEndReason.completed()))
    check_session_invariants(loaded.events)


def test_a_load_reads_a_step_as_it_was_stored() -> None:
    """A load checks no step's output: a log stored before a rule held still loads."""
    session = _step()
    events = [
        *session.events,
        Event(2, 0, AssistantMessage(1, 1, TEXT), None, "append"),
        Event(3, 0, AssistantMessage(1, 1, TEXT), None, "append"),
    ]
    loaded = Session.from_events(SessionHeader(id="s", created_at=0), events)
    assert [event.type for event in loaded.events][-2:] == ["assistant/message"] * 2


def test_the_loops_message_path_keeps_every_other_rule() -> None:
    """R7.36: ``append_message``, the loop's path vouching for its chunk seqs, logs the message
    sourced from them, announced as any append, and still refuses a second message; outside
    a turn it refuses as ``append`` does."""
    session = _step()
    heard: list[Event] = []
    session.observe(heard.append)
    first, second = _chunk(session), _chunk(session)
    event = session.append_message(AssistantMessage(1, 1, TEXT), range(first, second + 1))
    assert (event.source_event_seqs, event.surface_op) == ((first, second), "append")
    assert heard[-1] is event is session.events[-1]
    _refused(
        session,
        lambda s: s.append_message(AssistantMessage(1, 1, TEXT), None),
        "STEP_OUTPUT",
        f"a second assistant/message in the step (the first at seq {event.seq})",
    )
    with pytest.raises(SessionError) as caught:
        Session.create("t").append_message(AssistantMessage(1, 1, TEXT), None)
    assert caught.value.code == "NO_OPEN_TURN"


def test_a_message_names_each_tool_call_once() -> None:
    """R4.15: two tool-call blocks sharing an id would be answered by one call and one result."""
    session = _step()
    _refused(
        session,
        lambda s: _message(s, (ToolCall("a", "t", "{}"), ToolCall("a", "t", "{}"))),
        "STEP_OUTPUT",
        "tool call 'a' twice in the assistant/message",
    )


def test_a_rewrite_inside_a_step_is_no_output_of_it() -> None:
    """R4.20, R7.34: a message rewritten (pruned) inside a step before its model call leaves
    the step free to log the header it owes, as the invariant checks have it."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(StepStart(1, 1))
    session.append(AssistantMessage(1, 1, TEXT), surface="append")
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, TurnEndReason.completed()))
    session.append(TurnStart(2, TurnTrigger("message")))
    session.append(StepStart(2, 1))
    session.append(
        AssistantMessage(1, 1, (Text("pruned"),)), surface=Replace(2, 2), source_event_seqs=[2]
    )
    session.append(RequestHeader(EpochHeader(LlmCallConfig("m")), "initial"))
    session.append(AssistantMessage(2, 1, TEXT), surface="append")
    check_session_invariants(session.events)


def test_an_answered_call_is_not_made_again() -> None:
    """R4.15: a tool/call for a call the step made and answered is refused too, not only
    one still waiting for its result."""
    session = _step()
    _message(session)
    _result(session, "a", _call(session, "a"))
    _refused(
        session, lambda s: _call(s, "a"), "STEP_OUTPUT", "'a': the step made this call already"
    )


def test_a_result_is_sourced_from_its_call_alone() -> None:
    """R9.17: a result whose sources name its call and more is refused."""
    session = _step()
    _message(session)
    call = _call(session, "a")
    _refused(
        session,
        lambda s: s.append(
            ToolResultEvent(1, 1, "a", TEXT), surface="append", source_event_seqs=[call, 1]
        ),
        "CALL_RESULTS",
        f"sourced from [{call}, 1], not [{call}], its call",
    )


def test_a_request_header_between_steps_is_no_output_of_the_step_before() -> None:
    """R7.34 holds inside an open step only: a header logged after a step's end is not
    refused for that closed step's model output."""
    session = _step()
    _message(session, TEXT)
    session.append(StepEnd(1, 1))
    session.append(RequestHeader(EpochHeader(LlmCallConfig("m")), "initial"))
