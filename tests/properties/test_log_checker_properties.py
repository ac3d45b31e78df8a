"""Random logs shaped like the loop's pass every log checker and rebuild to the same history.

Logs of turns with tool steps (``tool/call`` records running ahead of the results, results
in model order, contexts after them), steering, custom events, header events, and surface
replaces logged before a step (R7.19): compaction of whole earlier turns into a summary and
pruning that rewrites an earlier tool result as a shorter one of the same call (R4.20). A
log may end inside a turn or a step. Properties: :func:`check_session_invariants`,
:func:`check_no_dangling_tool_calls` and :func:`check_history_replay` accept it (R4.13-R4.22,
R5.4, R9.17, R9.25); the incremental history equals that of the log rebuilt, stored and
loaded, and of every fork at a turn end (R5.6, R4.25); so does the header fold (R8.3).
"""

from __future__ import annotations

import attrs
from hypothesis import given, strategies as st

from retinue import MessageSource, Text, ToolCall
from retinue._request import LlmCallConfig
from retinue._stream import TextDelta
from retinue.session import (
    SURFACE_TYPES,
    AssistantMessage,
    ContextMessage,
    CustomEvent,
    EpochHeader,
    Event,
    EventData,
    Replace,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SessionHeader,
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
    dump_event,
    load_event,
)
from retinue.testing import (
    check_history_replay,
    check_no_dangling_tool_calls,
    check_session_invariants,
)

PLUGIN = MessageSource("plugin", "compactor")


def text(value: str) -> tuple[Text]:
    return (Text(value),)


@attrs.define
class _Builder:
    """Appends a loop-shaped log to a session, keeping what the rewrites need."""

    draw: st.DataObject
    session: Session = attrs.field(factory=lambda: Session.create("random"))
    turns: list[tuple[int, int]] = attrs.field(factory=list)
    """The first and last surface seq of each closed turn still whole on the surface."""
    results: list[int] = attrs.field(factory=list)
    """Seqs of tool results on the surface."""

    def append(self, data: EventData, *, sources: tuple[int, ...] | None = None) -> Event:
        surface: SurfaceOp | None = "append" if data.type in SURFACE_TYPES else None
        return self.session.append(data, surface=surface, source_event_seqs=sources)

    def rewrite(self, data: EventData, first: int, last: int, sources: tuple[int, ...]) -> int:
        return self.session.append(
            data, surface=Replace(first, last), source_event_seqs=sources
        ).seq

    def surface(self) -> list[int]:
        seqs: list[int] = []
        for event in self.session.events:
            op = event.surface_op
            if op == "append":
                seqs.append(event.seq)
            elif isinstance(op, Replace):
                first, last = seqs.index(op.start), seqs.index(op.end)
                seqs[first : last + 1] = [event.seq]
        return seqs

    def turn(self, turn: int) -> bool:
        """Log one turn; False if the log ends inside it."""
        self.append(TurnStart(turn, TurnTrigger("message")))
        first = self.append(UserMessage(text(f"prompt {turn}"))).seq
        if self.draw.draw(st.booleans()):
            self.append(CustomEvent("audit/note", {"turn": turn}))
        self.compact(turn)
        self.prune(turn)
        for step in range(1, self.draw.draw(st.integers(0, 3)) + 1):
            if not self.step(turn, step):
                return False
        if self.draw.draw(st.integers(0, 9)) == 0:
            return False
        last = self.surface()[-1]
        self.append(TurnEnd(turn, TurnEndReason.completed()))
        self.turns.append((first, last))
        return True

    def compact(self, turn: int) -> None:
        """Replace a run of whole earlier turns with one summary."""
        if not self.turns or not self.draw.draw(st.booleans()):
            return
        i = self.draw.draw(st.integers(0, len(self.turns) - 1))
        j = self.draw.draw(st.integers(i, len(self.turns) - 1))
        seqs = self.surface()
        start, end = seqs.index(self.turns[i][0]), seqs.index(self.turns[j][1])
        removed = seqs[start : end + 1]
        summaries: list[EventData] = [
            ContextMessage(text("summary"), PLUGIN),
            UserMessage(text("summary"), PLUGIN),
        ]
        summary = self.draw.draw(st.sampled_from(summaries))
        seq = self.rewrite(summary, removed[0], removed[-1], tuple(removed))
        self.turns[i : j + 1] = [(seq, seq)]
        self.results = [result for result in self.results if result not in removed]

    def prune(self, turn: int) -> None:
        """Rewrite an earlier tool result on the surface as a shorter one of the same call."""
        if not self.results or not self.draw.draw(st.booleans()):
            return
        old = self.draw.draw(st.sampled_from(self.results))
        data = self.session.events[old].data
        assert isinstance(data, ToolResultEvent)
        stamps = self.draw.draw(st.sampled_from([(data.turn, data.step), (turn, 0)]))
        seq = self.rewrite(
            ToolResultEvent(*stamps, data.call_id, text("[pruned]")), old, old, (old,)
        )
        self.results[self.results.index(old)] = seq
        self.turns = [
            (seq if first == old else first, seq if last == old else last)
            for first, last in self.turns
        ]

    def step(self, turn: int, step: int) -> bool:
        """Log one step; False if the log ends inside it."""
        self.append(StepStart(turn, step))
        if self.session.current_header is None:
            self.append(RequestHeader(EpochHeader(LlmCallConfig("m")), "initial"))
        elif self.draw.draw(st.booleans()):
            self.append(RequestHeaderDelta(config=LlmCallConfig(f"m{turn}.{step}")))
        chunk = self.session.append_chunk(turn, step, TextDelta(0, "x"))
        calls = [
            ToolCall(f"c{turn}.{step}.{i}", "t", "{}")
            for i in range(self.draw.draw(st.integers(0, 3)))
        ]
        self.append(AssistantMessage(turn, step, (*text("x"), *calls)), sources=(chunk,))
        call_seqs: dict[str, int] = {}
        for index, call in enumerate(calls):
            # A later call's tool/call record may run ahead of an earlier result (R9.17).
            while len(call_seqs) <= index or (
                len(call_seqs) < len(calls) and self.draw.draw(st.booleans())
            ):
                ahead = calls[len(call_seqs)]
                call_seqs[ahead.id] = self.append(
                    ToolCallEvent(turn, step, ahead.id, "t", "{}")
                ).seq
            if self.draw.draw(st.integers(0, 19)) == 0:
                return False
            result = ToolResultEvent(turn, step, call.id, text("output"))
            self.results.append(self.append(result, sources=(call_seqs[call.id],)).seq)
        if len(calls) > 0 and self.draw.draw(st.booleans()):
            self.append(ContextMessage(text("context"), PLUGIN))
        self.append(StepEnd(turn, step))
        if self.draw.draw(st.booleans()):
            self.append(SteeringMessage(turn, text("steer")))
        return True


def _rebuilt(events: list[Event]) -> Session:
    return Session.from_events(SessionHeader("rebuilt", 0), events)


@given(st.data())
def test_random_loop_shaped_logs_pass_every_checker_and_rebuild(data: st.DataObject) -> None:
    """R4.13-R4.22, R4.25, R5.4, R5.6, R8.3, R9.17, R9.25: see the module docstring."""
    builder = _Builder(data)
    for turn in range(1, data.draw(st.integers(0, 4)) + 1):
        if not builder.turn(turn):
            break
    session = builder.session
    events = list(session.events)
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)
    history = list(session.derive_messages())
    assert list(_rebuilt(events).derive_messages()) == history
    assert _rebuilt(events).current_header == session.current_header
    loaded = [load_event(dump_event(event)) for event in events]
    assert list(_rebuilt(loaded).derive_messages()) == history
    for event in events:
        if isinstance(event.data, TurnEnd):
            child = session.fork("child", event.seq)
            prefix = _rebuilt(events[: event.seq + 1])
            assert list(child.derive_messages()) == list(prefix.derive_messages())
            assert child.next_turn_number() == prefix.next_turn_number()
