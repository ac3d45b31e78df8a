"""Conformance checkers for session logs and the no-dangling-call guarantee."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from retinue._content import ToolCall
from retinue._errors import InvalidJsonError, SessionError
from retinue._lossless import shown_short
from retinue.session import (
    SURFACE_TYPES,
    AssistantChunk,
    AssistantMessage,
    CustomEvent,
    EpochHeader,
    Event,
    Replace,
    RequestHeader,
    RequestHeaderDelta,
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
    fold_header,
)

from ._history_fold import check_history_calls, fold_messages
from ._invariant import InvariantError, fail as _fail, log_of
from ._step_output import StepOutput
from ._surface import SurfaceWalk

__all__ = [
    "InvariantError",
    "check_history_replay",
    "check_no_dangling_tool_calls",
    "check_session_invariants",
]


@attrs.define(eq=False)
class _CallLedger:
    """Tool calls of the open step and their results: each call gets exactly one (R4.15).

    A ``tool/result`` answers a ``tool/call`` of its own step that has no
    result yet; every ``tool/call`` is answered before the step's
    ``step/end``, or before whatever boundary cuts the step off. A call id
    names one call of its step, so it is never repeated within the step.

    Results are committed in model call order, each pointing at its own
    ``tool/call`` (R9.17): a result whose ``source_event_seqs`` name
    anything else fails, and so does a result logged after that of a call
    the step's ``assistant/message`` lists later. Synthetic results (aborts,
    never-started calls, crash repair) are logged in that order too; a
    result without source seqs is accepted, as crash repair may not know
    them (R11.9), and a call the assistant message does not list has no
    model position to check.
    """

    called: set[str] = attrs.field(factory=set)
    pending: dict[str, int] = attrs.field(factory=dict)
    answered: set[str] = attrs.field(factory=set)
    positions: dict[str, int] = attrs.field(factory=dict)
    """Each call id's place among the tool-call blocks of the step's assistant message."""
    last_answered: tuple[int, str] | None = None
    """The model position and id of the step's latest result that has a position."""

    def feed(self, event: Event) -> None:
        data = event.data
        if isinstance(event.surface_op, Replace):
            self._rewrite(event)
        elif isinstance(data, StepStart | StepEnd | TurnStart | TurnEnd):
            self._settle(event)
        elif isinstance(data, AssistantMessage):
            self._list_calls(data)
        elif isinstance(data, ToolCallEvent):
            self._call(event, data)
        elif isinstance(data, ToolResultEvent):
            self._answer(event, data)

    def _rewrite(self, event: Event) -> None:
        """A surface replace rewriting history (R4.20) is no call nor result of the open step.

        A tool result rewritten (pruned) still names a call made earlier (R4.15).
        """
        data = event.data
        if isinstance(data, ToolResultEvent) and data.call_id not in self.called:
            raise _fail(event, "R4.15", f"tool/result {data.call_id!r} has no earlier tool/call")

    def _list_calls(self, data: AssistantMessage) -> None:
        calls = (block.id for block in data.content if isinstance(block, ToolCall))
        for position, call_id in enumerate(calls):
            self.positions.setdefault(call_id, position)

    def _call(self, event: Event, data: ToolCallEvent) -> None:
        call_id = data.call_id
        if call_id in self.pending or call_id in self.answered:
            raise _fail(event, "R4.15", f"tool/call {call_id!r}: duplicate call id in step")
        self.called.add(call_id)
        self.pending[call_id] = event.seq

    def _answer(self, event: Event, data: ToolResultEvent) -> None:
        call_id = data.call_id
        call_seq = self.pending.pop(call_id, None)
        if call_seq is not None:
            self.answered.add(call_id)
            self._check_source(event, call_id, call_seq)
            self._check_order(event, call_id)
        elif call_id in self.answered:
            raise _fail(event, "R4.15", f"tool/result {call_id!r}: the call is already answered")
        elif call_id not in self.called:
            raise _fail(event, "R4.15", f"tool/result {call_id!r} has no earlier tool/call")
        else:
            raise _fail(
                event, "R4.15", f"tool/result {call_id!r} has no tool/call in step {data.step}"
            )

    @staticmethod
    def _check_source(event: Event, call_id: str, call_seq: int) -> None:
        sources = event.source_event_seqs
        if sources is not None and (len(sources) != 1 or sources[0] != call_seq):
            raise _fail(
                event,
                "R9.17",
                f"tool/result {call_id!r} has source_event_seqs {list(sources)}, "
                f"not [{call_seq}], its own tool/call",
            )

    def _check_order(self, event: Event, call_id: str) -> None:
        position = self.positions.get(call_id)
        if position is None:
            return
        last = self.last_answered
        if last is not None and last[0] > position:
            raise _fail(
                event,
                "R9.17",
                f"tool/result {call_id!r} (call {position} of the assistant message) "
                f"after the result of {last[1]!r} (call {last[0]}): results follow model order",
            )
        self.last_answered = (position, call_id)

    def _settle(self, event: Event) -> None:
        # A step cut off without its step/end (a log the walk would reject, but
        # the replay check walks nothing else) must still have answered its calls.
        if self.pending:
            call_id, seq = next(iter(self.pending.items()))
            raise _fail(event, "R4.15", f"tool/call {call_id!r} (seq {seq}) has no result")
        self.answered.clear()
        self.positions.clear()
        self.last_answered = None


def _check_call_results(events: Sequence[Event]) -> None:
    """Check R4.15 and R9.17: each tool call has one result, in its step, in model order."""
    ledger = _CallLedger()
    for event in events:
        ledger.feed(event)


@attrs.define(eq=False)
class _Walk:
    """The boundary state of a log being walked in order."""

    turn: int | None = None
    last_turn: int = 0
    step: int | None = None
    last_step: int = 0
    calls: _CallLedger = attrs.field(factory=_CallLedger)
    output: StepOutput = attrs.field(factory=StepOutput)
    surface: SurfaceWalk = attrs.field(factory=SurfaceWalk)
    header: EpochHeader | None = None
    """The header folded so far (R8.3)."""

    def check(self, event: Event) -> None:
        data = event.data
        if isinstance(data, TurnStart):
            self._turn_start(event, data)
        elif isinstance(data, TurnEnd):
            self._turn_end(event, data)
        elif self.turn is None:
            # A plugin's events may sit between turns (a setup restoring its state);
            # derivation ignores them, and they belong to no turn (R4.11).
            if type(data) is not CustomEvent:
                raise _fail(event, "R4.13", "event outside any turn")
        elif isinstance(data, StepStart):
            self._step_start(event, data)
        elif isinstance(data, StepEnd):
            self._step_end(event, data)
        else:
            self._in_turn(event)
        if event.surface_op is not None:
            self.surface.feed(event)
        self.calls.feed(event)

    def _turn_start(self, event: Event, data: TurnStart) -> None:
        if self.turn is not None:
            raise _fail(event, "R4.14", f"turn {data.turn} opens while turn {self.turn} is open")
        if data.turn != self.last_turn + 1:
            raise _fail(event, "R4.16", f"turn {data.turn} follows turn {self.last_turn}")
        self.turn = self.last_turn = data.turn
        self.last_step = 0

    def _turn_end(self, event: Event, data: TurnEnd) -> None:
        if self.turn is None:
            raise _fail(event, "R4.13", f"turn/end {data.turn} with no open turn")
        if data.turn != self.turn:
            raise _fail(event, "R4.14", f"turn/end {data.turn} closes open turn {self.turn}")
        if self.step is not None:
            raise _fail(event, "R4.14", f"turn {self.turn} closes with step {self.step} open")
        self._end_reason(event, data.reason)
        self.turn = None

    def _end_reason(self, event: Event, reason: TurnEndReason) -> None:
        """A turn's end fits the steps it ran: ``rejected`` ran none (R7.39), and an
        ``error`` names a step it ran, or the one it failed to open (R4.12)."""
        ran = self.last_step
        if reason.kind == "rejected" and ran:
            raise _fail(event, "R7.39", f"turn {self.turn} ends rejected after {ran} step(s)")
        if reason.kind == "error" and not 0 <= (reason.step or 0) <= ran + 1:
            raise _fail(
                event, "R4.12", f"turn {self.turn} ends error at step {reason.step} of {ran}"
            )

    def _step_start(self, event: Event, data: StepStart) -> None:
        if data.turn != self.turn:
            raise _fail(event, "R4.14", f"step of turn {data.turn} inside turn {self.turn}")
        if self.step is not None:
            raise _fail(event, "R4.14", f"step {data.step} opens while step {self.step} is open")
        if data.step != self.last_step + 1:
            raise _fail(event, "R4.16", f"step {data.step} follows step {self.last_step}")
        self.step = self.last_step = data.step
        self.output = StepOutput()

    def _step_end(self, event: Event, data: StepEnd) -> None:
        if self.step is None or (data.turn, data.step) != (self.turn, self.step):
            open_step = None if self.step is None else (self.turn, self.step)
            raise _fail(event, "R4.14", f"step/end {(data.turn, data.step)} closes {open_step}")
        self.step = None

    def _in_turn(self, event: Event) -> None:
        if isinstance(event.surface_op, Replace):
            # A rewrite of history (compaction, pruning: R4.20) keeps the stamps of
            # what it rewrites, and is logged outside any step (R7.19) as well.
            return
        data = event.data
        if isinstance(data, AssistantChunk | AssistantMessage | ToolCallEvent | ToolResultEvent):
            if self.step is None or not _stamped(data.turn, data.step, (self.turn, self.step)):
                open_step = None if self.step is None else (self.turn, self.step)
                stamp = shown_short((data.turn, data.step))
                raise _fail(event, "R4.14", f"stamped step {stamp}, open step {open_step}")
            self.output.feed(event)
        elif isinstance(data, SteeringMessage) and data.turn != self.turn:
            raise _fail(event, "R4.13", f"steering for turn {data.turn} inside turn {self.turn}")
        elif isinstance(data, RequestHeader | RequestHeaderDelta):
            self._header(event, data)

    def _header(self, event: Event, data: RequestHeader | RequestHeaderDelta) -> None:
        if self.step is not None:
            self.output.header(event)
        if isinstance(data, RequestHeaderDelta) and self.header is None:
            raise _fail(event, "R4.18", "request/header-delta before the first request/header")
        try:
            self.header = fold_header(self.header, data)
        except (SessionError, TypeError) as error:
            # A delta not made from the header it follows: a session refuses it at append.
            raise _fail(event, "R8.5", f"does not fold onto the header: {error}") from error


def _stamped(turn: object, step: object, open_step: tuple[int | None, int]) -> bool:
    """Whether a stamp names *open_step* by exact ints, as a session logs it.

    A chunk is a named tuple no constructor checks: ``True`` or ``1.0`` equals the
    step's number but is stored as ``true`` or ``1.0``, which no store loads back.
    """
    return type(turn) is int and type(step) is int and (turn, step) == open_step


def _check_event_shape(index: int, event: Event) -> None:
    # Exact ints, as a session takes them: ``True`` or ``1.0`` equals an index
    # but is stored as ``true`` or ``1.0``, which no store loads back as a seq.
    if type(event.seq) is not int or event.seq != index:
        raise _fail(event, "R4.2", f"seq {event.seq!r} at index {index}")
    surface, op = event.type in SURFACE_TYPES, event.surface_op
    if surface != (op is not None):
        wanted = "needs" if surface else "must not carry"
        raise _fail(event, "R4.6", f"{event.type} {wanted} a surface op")
    # As a session tests it (INVALID_SURFACE_OP), so the two refuse the same logs.
    if surface and op != "append" and type(op) is not Replace:
        raise _fail(event, "R4.6", f"surface op {op!r} is neither 'append' nor a Replace")
    sources = event.source_event_seqs
    if sources is not None and (
        not sources
        or any(type(source) is not int for source in sources)
        or len(set(sources)) != len(sources)
        or min(sources) < 0
        or max(sources) >= event.seq
    ):
        raise _fail(event, "R4.22", f"source_event_seqs {sources} not non-empty, unique, earlier")


def check_session_invariants(events: Iterable[Event]) -> None:
    """Check every invariant a session log keeps, plus the no-dangling-call guarantee.

    Rules: R4.2 (seq == index), R4.6 (surface types, and only they, carry a
    surface op: ``"append"`` or a :class:`Replace`), R4.13 (turn enclosure),
    R4.14 (turn and step nesting, chunks inside their step), R7.36 (a
    step's chunks, then at most one ``assistant/message`` sourced from
    exactly those chunks, or from none when none streamed), R9.10 (a
    ``tool/call`` starts a tool call that message lists), R7.34 (a header
    event in a step comes before its chunks and message), R4.15 (each
    ``tool/call`` gets exactly one ``tool/result``, after it, before its
    step ends), R9.17 (a step's results in the model's call order, each
    sourced from its own ``tool/call`` when it names a source), R4.16 (turn
    numbers +1, steps from 1), R4.18 (no header delta before a header),
    R8.5 (each header delta folds onto the header before it, as a session folds it),
    R4.19 (a replace names a range of the current surface, its start not
    after its end, every replaced seq among its ``source_event_seqs``),
    R4.22 (source seqs), and :func:`check_no_dangling_tool_calls`. A log may
    end inside a turn.

    An event logged with a surface replace rewrites history (compaction,
    pruning: R4.20), wherever the turn is (R7.19: before a step): it is no
    message, call or result of the open step, so the step rules above pass it
    by; a ``tool/result`` rewritten so still names a call made earlier (R4.15).

    Not checked: where a ``context/message`` falls among a step's results.
    R9.18 puts the contexts the scheduler collects after every result, but
    ``inject`` during a turn logs one wherever the turn is (R2.17), and the
    log does not say which is which. Nor is a header event logged in a turn
    but outside any step: the loop logs one only in its step (R7.34), but a
    session takes one there, and hand-built logs hold them.

    Raises:
        InvariantError: naming the first offending seq and the rule.
        TypeError: *events* is no log of events (:func:`log_of`).
    """
    log = log_of(events, "check_session_invariants")
    walk = _Walk()
    for index, event in enumerate(log):
        _check_event_shape(index, event)
        walk.check(event)
    _check_results_of_calls(log)


@attrs.define(eq=False)
class _StepCalls:
    """Tool calls of one step and the results logged for them."""

    calls: dict[str, int] = attrs.field(factory=dict)
    results: dict[str, int] = attrs.field(factory=dict)

    def call(self, event: Event, block: ToolCall) -> None:
        if block.id in self.calls:
            raise _fail(event, "R4.15", f"tool call {block.id!r}: duplicate call id in step")
        self.calls[block.id] = event.seq

    def answer(self, event: Event, data: ToolResultEvent) -> None:
        if data.call_id in self.results:
            first = self.results[data.call_id]
            raise _fail(
                event, "R9.25", f"second result for {data.call_id!r} (first at seq {first})"
            )
        if data.call_id in self.calls:
            self.results[data.call_id] = event.seq

    def settle(self, event: Event) -> None:
        for call_id, seq in self.calls.items():
            if call_id not in self.results:
                raise _fail(event, "R9.25", f"tool call {call_id!r} (seq {seq}) has no result")


def check_no_dangling_tool_calls(events: Iterable[Event]) -> None:
    """Check that each tool call of a closed step has exactly one result in that step (R9.25).

    Every tool-call block of a logged ``assistant/message`` must get exactly
    one ``tool/result`` with its call id after it and before the step's
    ``step/end`` (or the next ``step/start`` or ``turn/end`` if the step never
    closed). A call id appears once per step. A step still open at the end of
    the log is not checked, nor is an event logged with a surface replace (a
    rewrite of history, R4.20). The order and sources of the results are
    :func:`check_session_invariants`' concern (R9.17).

    Raises:
        InvariantError: naming the closing seq of the step and the call id.
        TypeError: *events* is no log of events (:func:`log_of`).
    """
    _check_results_of_calls(log_of(events, "check_no_dangling_tool_calls"))


def _check_results_of_calls(events: Sequence[Event]) -> None:
    """:func:`check_no_dangling_tool_calls` on a log already taken."""
    step: _StepCalls | None = None
    for event in events:
        data = event.data
        if isinstance(data, StepStart | StepEnd | TurnStart | TurnEnd):
            if step is not None:
                step.settle(event)
            step = _StepCalls() if isinstance(data, StepStart) else None
        elif step is None or isinstance(event.surface_op, Replace):
            # A rewrite of history (R4.20) neither makes calls nor answers them.
            continue
        elif isinstance(data, AssistantMessage):
            for block in data.content:
                if isinstance(block, ToolCall):
                    step.call(event, block)
        elif isinstance(data, ToolResultEvent):
            step.answer(event, data)


def check_history_replay(events: Iterable[Event], *, session_id: str = "replay") -> None:
    """Check that a session rebuilt from *events* derives the history a fresh fold gives.

    Rebuilds with ``Session.from_events`` (which re-validates every event) and
    compares its ``derive_messages()`` with an independent fold of the surface
    (R5.6, R8.9). Also checks that every ``tool/call`` of the log has exactly
    one ``tool/result``, logged in the call's own step (R4.15) in the model's
    call order and sourced from that ``tool/call`` (R9.17), and that the
    replayed history pairs each tool-call block with exactly one tool result
    after it and before the next assistant message, every tool result
    answering such a block (R5.4). Calls of a step still open at the end of
    the log may still be waiting for their results.

    Raises:
        InvariantError: the log cannot be rebuilt, a call is not answered
            exactly once or in model order, or the histories differ.
        TypeError: *events* is no log of events (:func:`log_of`).
        SessionError: *session_id* is no session id.
    """
    events = log_of(events, "check_history_replay")
    # Built before the replay: a header refused is the caller's mistake, not the log's.
    header = SessionHeader(session_id, 0)
    try:
        session = Session.from_events(header, events)
    except (SessionError, InvalidJsonError) as error:
        raise InvariantError(f"R5.6: the log cannot be replayed: {error}") from error
    _check_call_results(events)
    derived = list(session.derive_messages())
    folded = fold_messages(events)
    if derived != [message for _, message in folded]:
        at = next(
            (
                i
                for i, (message, (_, expected)) in enumerate(zip(derived, folded, strict=False))
                if message != expected
            ),
            min(len(derived), len(folded)),
        )
        raise InvariantError(
            f"R5.6: replayed history differs from a fresh fold at message {at} "
            f"({len(derived)} vs {len(folded)} messages)"
        )
    check_history_calls(folded, events)
