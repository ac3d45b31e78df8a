"""Random loop-shaped logs with one step's model output broken: check_session_invariants names
the broken event and its rule.

The logs come from the builder of :mod:`tests.properties.test_log_checker_properties`. One
``assistant/message`` of a step is re-sourced from no event or from its own ``step/start``
rather than its chunks (R7.36), or a ``tool/call`` of a step names a call its message does
not list (R9.10). Every event before the broken one is as the loop logs it, so the error is
the first the walk meets.
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from retinue.session import AssistantMessage, Event, StepStart, ToolCallEvent
from retinue.testing import InvariantError, check_session_invariants
from tests.properties.test_log_checker_properties import _Builder


def _loop_log(data: st.DataObject) -> list[Event]:
    builder = _Builder(data)
    for turn in range(1, data.draw(st.integers(1, 3)) + 1):
        if not builder.turn(turn):
            break
    return list(builder.session.events)


def _step_start_before(events: list[Event], seq: int) -> int:
    return next(e.seq for e in reversed(events[:seq]) if isinstance(e.data, StepStart))


@given(st.data())
def test_a_message_sourced_from_other_than_its_chunks_is_named(data: st.DataObject) -> None:
    """R7.36: a step's ``assistant/message`` is sourced from exactly the step's chunks."""
    events = _loop_log(data)
    messages = [
        e.seq for e in events if isinstance(e.data, AssistantMessage) and e.surface_op == "append"
    ]
    if not messages:
        return
    seq = data.draw(st.sampled_from(messages))
    wrong = data.draw(st.sampled_from([None, (_step_start_before(events, seq),)]))
    events[seq] = events[seq]._replace(source_event_seqs=wrong)
    with pytest.raises(InvariantError, match=rf"^seq {seq} \(assistant/message\): R7\.36: "):
        check_session_invariants(events)


@given(st.data())
def test_a_tool_call_its_message_does_not_list_is_named(data: st.DataObject) -> None:
    """R9.10: a ``tool/call`` starts a tool-call block of its step's assistant message."""
    events = _loop_log(data)
    calls = [e.seq for e in events if isinstance(e.data, ToolCallEvent)]
    if not calls:
        return
    seq = data.draw(st.sampled_from(calls))
    record = events[seq].data
    assert isinstance(record, ToolCallEvent)
    renamed = ToolCallEvent(record.turn, record.step, "unlisted", record.name, record.arguments)
    events[seq] = events[seq]._replace(data=renamed)
    with pytest.raises(InvariantError, match=rf"^seq {seq} \(tool/call\): R9\.10: .*'unlisted'"):
        check_session_invariants(events)
