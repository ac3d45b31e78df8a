"""Per-turn bookkeeping and the balanced-close helpers (R7.44-R7.47)."""

from __future__ import annotations

import logging

import attrs
import trio

from retinue._content import ContentBlock, Text, ToolCall, content_text
from retinue._cuts import text_start
from retinue._errors import describe_failure, error_code, leaf_error
from retinue._stream import Usage
from retinue.session import (
    AssistantMessage,
    EventData,
    Session,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
)
from retinue.tools import PreparedCall, ToolExecutionResult

from ._core import AgentCore
from ._summary import add_usage

__all__ = ["NO_CALLS", "StepCalls", "TurnState"]

log = logging.getLogger("retinue.loop")


@attrs.define(eq=False, slots=True, init=False)
class StepCalls:
    """The tool calls of one step's logged assistant message and what became of them."""

    calls: tuple[ToolCall, ...]
    call_seqs: dict[str, int]
    started: dict[str, ToolExecutionResult | None]
    """Calls whose body was dispatched, with the result it returned while a ``tools/execute``
    wrapper still ran around it (put by the registry), else ``None``."""
    answered: set[str]
    settled: dict[str, tuple[PreparedCall, ToolExecutionResult]]
    """Calls with their outcome (a body that finished, or a pre-execute denial), committed or not."""

    def __init__(self, calls: tuple[ToolCall, ...]) -> None:
        # Written out, not attrs' factories: one record per step with tool calls.
        self.calls = calls
        self.call_seqs = {}
        self.started = {}
        self.answered = set()
        self.settled = {}


# A step without tool calls (or before its message is logged): nothing to answer,
# and never written to, since only a step's calls are; shared, so that such a
# step does not build a record to drop.
NO_CALLS = StepCalls(())


@attrs.define(eq=False, slots=True)
class TurnState:
    """The open turn: its number, step, end reason and whether a step is open."""

    core: AgentCore
    turn: int
    step: int = 0
    reason: TurnEndReason = TurnEndReason.completed()
    step_open: bool = False
    terminal: bool = False
    calls: StepCalls = NO_CALLS
    """The open (or last) step's calls; a step with tool calls has a record of its own."""
    text: str = ""
    """The last non-empty assistant text logged in this turn (what ``ask`` returns)."""
    usage: Usage | None = None
    """The summed usage of this turn's assistant messages."""
    error: BaseException | None = None
    """The first error recorded, until the turn's result carries it (its end logs less)."""
    error_recorded: bool = False
    """Whether an error ended the turn (the first one wins, R7.45)."""
    blocked: dict[int, str] | None = None
    """The reason each prompt a prompt-submit listener blocked was, by its place in the batch."""
    interruption: BaseException | None = None
    """What the driver began unwinding in this turn (a cancel from outside, Ctrl-C): a
    crash closing the turn hands it to the supervisor."""
    ctrl_c: BaseException | None = None
    """A Ctrl-C raised while the step's calls were answered at its close: raised once the
    turn is closed and flushed."""

    def note_blocked(self, index: int, reason: str) -> None:
        """Record that the batch's prompt at *index* was blocked for *reason* (R7.11)."""
        if self.blocked is None:
            self.blocked = {}
        self.blocked[index] = reason

    def note_answer(self, content: tuple[ContentBlock, ...], usage: Usage | None) -> None:
        """Fold a logged assistant message into the turn's result text and usage."""
        text = content_text(content)
        if text:
            self.text = text
        if usage is not None:
            self.usage = add_usage(self.usage, usage)

    def hold_interrupt(self, exc: BaseException) -> None:
        """Hold *exc*, Ctrl-C raised while the turn is closed, until the close is done; an
        Exception (a bug) is raised at once, to end the turn as a failure does (or as a
        crash, from a close a cancel from outside began)."""
        if isinstance(exc, Exception):
            raise exc
        self.core.services.end_on_interrupt(exc)
        self.ctrl_c = self.ctrl_c or exc

    def note_usage(self, usage: Usage | None) -> None:
        """Fold the usage of a step that logged no message into the turn's usage."""
        if usage is not None:
            self.usage = add_usage(self.usage, usage)

    def record_error(self, error: BaseException) -> None:
        """First error wins (R7.45); reports ``agent/error`` with failures contained."""
        if self.error_recorded:
            return
        error = leaf_error(error)
        code = error_code(error)
        if code is None and not isinstance(error, Exception):
            code = "UNKNOWN"
        self.reason = TurnEndReason.error(self.step, describe_failure(error), code)
        self.error = error
        self.error_recorded = True
        self.core.emit("agent/error", self.turn, self.step, error)

    def hand_on_error(self) -> BaseException | None:
        """The error recorded, which the turn's result now carries, let go of here.

        Its traceback holds the frames of the turn, which hold this state: kept
        here too, the two would be left in a cycle for the cyclic collector.
        """
        error, self.error = self.error, None
        return error

    def set_interrupted(self) -> None:
        """End reason after an abort: ``disposed`` wins over ``aborted`` (R7.17, R7.39).

        An interruption no ``cancel`` asked for (no cancel reason) came from outside
        the agent: its runtime being torn down, which disposes it (R2.36, R12.10).
        """
        if self.error_recorded:
            return
        core = self.core
        if core.disposed or core.cancel_reason is None:
            self.reason = TurnEndReason.disposed()
        else:
            self.reason = TurnEndReason.aborted(core.cancel_reason)

    def close_aborted_step(self, reason: str | None) -> None:
        """Close the step an abort ended: synthetic results, ``step/end``, interrupted (R7.22)."""
        self.answer_dangling_calls("ABORTED", f"cancelled ({_quoted(reason)})")
        self.close_step()
        self.set_interrupted()

    def note_max_tokens(self) -> None:
        """A cut step makes the turn ``max-tokens`` unless something stronger was set (R7.23)."""
        if self.reason.kind == "completed":
            self.reason = TurnEndReason.max_tokens()

    # The short appends below, with what records them, are KI-protected, as trio's own code
    # is: Ctrl-C coming while one runs is handed to the main task (raised at its next
    # checkpoint, which ends the runtime), rather than raised between an event logged
    # and its record, which would leave a call without its result or logged twice, or a
    # step or turn open. Their session observers run protected too. Free per call: trio
    # marks the code, and looks it up only when the signal comes.
    @trio.lowlevel.enable_ki_protection
    def close_step(self) -> None:
        """Append ``step/end`` once; an observer failure becomes a turn error (R7.46)."""
        if not self.step_open:
            return
        end = StepEnd(self.turn, self.step)
        self.step_open = False
        try:
            self.core.session.append(end)
        except Exception as exc:
            self.record_error(exc)
        except BaseException:
            # Interrupted inside the append before it was logged: the step is the
            # turn's close to end, or the turn/end after it would be refused.
            self.step_open = not _logged_in_step(self.core.session, end)
            raise

    @trio.lowlevel.enable_ki_protection
    def close_turn(self) -> None:
        """Append ``turn/end`` exactly once; an observer failure is swallowed (R7.44)."""
        session = self.core.session
        if not (session.is_turn_open and session.last_turn == self.turn):
            return
        try:
            session.append(TurnEnd(self.turn, self.reason))
        except Exception:
            log.exception("turn/end observer failed for agent %s (contained)", self.core.id)
        except BaseException as exc:
            # Ctrl-C from an observer of the logged turn/end: held, so the turn is flushed
            # and its askers hear how it ended before it goes on.
            self.hold_interrupt(exc)

    def answer_dangling_calls(self, code: str, ended: str) -> None:
        """Give every logged tool call of the step without a result a synthetic one.

        A call never started gets ``ABORTED_BEFORE_DISPATCH`` (and its missing
        ``tool/call`` record), unless pre-execute had denied it; a started one
        gets *code*, unless its body had finished. A denied or finished call gets
        its own result instead (R9.20), when no post-execute listener has yet to
        see it. *ended* says what ended the step ("cancelled (reason)"), as the
        synthetic result tells the model. Observer failures are contained so the
        log stays a valid transcript (R9.21, R9.25).
        """
        for call in self.calls.calls:
            if call.id in self.calls.answered:
                continue
            try:
                self._answer_dangling(call, code, ended)
            except BaseException as exc:
                # Ctrl-C (an observer's failure is contained): the other calls are
                # answered all the same, or every later request would carry them
                # unanswered. A bug goes on: the crash's close answers every call.
                self.hold_interrupt(exc)

    def _answer_dangling(self, call: ToolCall, code: str, ended: str) -> None:
        started = call.id in self.calls.started
        this_code = code if started else "ABORTED_BEFORE_DISPATCH"
        if call.id not in self.calls.call_seqs and not self._log_missing_call(call):
            return
        if self._log_settled(call):
            return
        text = self._dangling_text(call, ended, started=started)
        error = ToolErrorInfo(_error_name(this_code), this_code)
        try:
            synthetic = ToolExecutionResult(call.id, Text(text), is_error=True, error=error)
            self.log_result(call.id, synthetic)
        except Exception:
            log.exception("tool/result observer failed for agent %s (contained)", self.core.id)

    def _dangling_text(self, call: ToolCall, ended: str, *, started: bool) -> str:
        """What the model is told of a call the step's end left without its own result."""
        if not started:
            return "Error: the tool call was aborted before it started"
        # The body's own result first: a wrapper cancelled after the body returned left
        # the call unsettled, and one that failed a body that ran made its result an error.
        result = self.calls.started.get(call.id)
        if result is None:
            settled = self.calls.settled.get(call.id)
            if settled is None:
                return f"Error: the tool call was {ended}"
            result = settled[1]
        # Its result was there, but a wrapper or a post-execute listener had yet to see
        # it. Told a call that ran was cancelled, the model would ask for it again, and
        # a write or a command would run twice; told one that failed (or never ran: an
        # unknown tool, refused arguments, a timeout) ran, it would count on what it
        # never did.
        outcome = "failed" if result.is_error else "ran to its end"
        return (
            f"Error: the tool call {outcome}, but the step was {ended} before its "
            "result was final, so it is not shown"
        )

    @trio.lowlevel.enable_ki_protection
    def log_call(self, call: ToolCall) -> None:
        """Append the ``tool/call`` of *call*; its seq is recorded once the log holds it,
        whatever raised.

        An observer that raised had it logged (R4.8): unrecorded, it would be logged
        again, as never started, when the turn is closed. An interruption inside the
        append before it was logged leaves it to be logged then.
        """
        session = self.core.session
        seq = len(session.events)
        logged = ToolCallEvent(self.turn, self.step, call.id, call.name, call.arguments)
        try:
            session.append(logged)
        except BaseException:
            if _logged_in_step(session, logged):
                self.calls.call_seqs[call.id] = seq
            raise
        self.calls.call_seqs[call.id] = seq

    @trio.lowlevel.enable_ki_protection
    def log_result(self, call_id: str, final: ToolExecutionResult) -> None:
        """Append the ``tool/result`` of *final*, pointing at its ``tool/call`` (R9.17);
        the call counts as answered once the log holds it, whatever raised.

        An observer that raised had it logged (R4.8). An interruption inside the
        append before it was logged leaves the call to be answered when the turn
        is closed: counted answered, it would stay a call without a result, which
        every later request would carry.
        """
        # Positional (is_error, error, meta): a class called with keywords is given
        # them as a dict, built per call.
        logged = ToolResultEvent(
            self.turn, self.step, call_id, final.content, final.is_error, final.error, final.meta
        )
        try:
            self.core.session.append(
                logged, surface="append", source_event_seqs=(self.calls.call_seqs[call_id],)
            )
        except BaseException:
            if _logged_in_step(self.core.session, logged):
                self.calls.answered.add(call_id)
            raise
        self.calls.answered.add(call_id)

    def note_calls_if_logged(self, message: AssistantMessage, calls: tuple[ToolCall, ...]) -> None:
        """After the append of the step's *message*, or its record, raised: its *calls* are
        the step's to answer only if the log holds it (R9.10).

        A raising observer still leaves the message logged, and its calls then need
        their synthetic results, as does Ctrl-C landing after the append; Ctrl-C
        landing inside it before it was logged leaves no call to answer, whose
        result would come without it.
        """
        if calls and _logged_in_step(self.core.session, message):
            self.calls = StepCalls(calls)

    def _log_settled(self, call: ToolCall) -> bool:
        """Log the result a finished body returned; whether there was one to log."""
        settled = self.calls.settled.get(call.id)
        if settled is None:
            return False
        try:
            final = self.core.services.tools.finish_at_once(*settled)
            if final is None:
                return False
            self.log_result(call.id, final)
        except Exception:
            log.exception("logging a tool result failed for agent %s (contained)", self.core.id)
        except BaseException as exc:
            # Ctrl-C from a tools/result listener or an observer.
            self.hold_interrupt(exc)
        # Unless its result was logged (an observer failing after the append, R4.8), the
        # call is answered as one whose result is not shown.
        return call.id in self.calls.answered

    def _log_missing_call(self, call: ToolCall) -> bool:
        """Append the ``tool/call`` record of a call never started; whether it is logged.

        An observer failure leaves it logged (R4.8), and then it needs its result too.
        """
        try:
            self.log_call(call)
        except Exception:
            log.exception("tool/call observer failed for agent %s (contained)", self.core.id)
        except BaseException as exc:
            # Ctrl-C: held, so a logged call gets its result.
            self.hold_interrupt(exc)
        return call.id in self.calls.call_seqs


def _logged_in_step(session: Session, data: EventData) -> bool:
    """Whether *data* itself is logged in the open step, looked for back to its ``step/start``.

    For an append of the step's that raised: an observer's raise comes once it is
    logged (R4.8), perhaps after events of its own; Ctrl-C may land before.
    """
    for event in reversed(session.events):
        if event.data is data:
            return True
        if type(event.data) is StepStart:
            return False
    return False


# The most of a cancel's reason a cut-off call's result quotes: the turn's end keeps it
# whole (R2.28), while each result holds a copy, sent in every later request.
_QUOTED_REASON = 1000


def _quoted(reason: str | None) -> str | None:
    """*reason* as a result quotes it: whole, or a long one by its start and length."""
    if reason is None or len(reason) <= _QUOTED_REASON:
        return reason
    return f"{text_start(reason, _QUOTED_REASON)}... ({len(reason)} characters)"


def _error_name(code: str) -> str:
    return "InternalError" if code == "INTERNAL" else "AbortedError"
