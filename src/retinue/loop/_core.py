"""The state an agent's driver and its verbs share, and the synchronous verbs themselves."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, final

import attrs
import trio

from retinue._content import Message, as_prompt
from retinue._errors import (
    AgentDisposedError,
    AgentNotReadyError,
    ConfigError,
    is_interrupt,
)
from retinue._handle import AgentHandle, AgentStatus, Content, TurnResult
from retinue._lossless import shown_short
from retinue._options import AgentOptions
from retinue._readonly import ReadOnlyDict
from retinue._request import LlmCallConfig
from retinue._sources import MessageSource, resolve_source
from retinue.hooks import HookBus
from retinue.mailbox import Mailbox, MailboxItem, Ticket
from retinue.prompt import Section
from retinue.session import ContextMessage, Session, TurnEnd, TurnEndReason, TurnStart, TurnTrigger

from ._flushes import FlushRounds
from ._marks import runs_under, tearing_down_agent
from ._signal import StepSignal, abort_reason, abort_step, retire_step
from ._toolcall import tool_thread_mark

if TYPE_CHECKING:
    from retinue.providers import Model
    from retinue.stores import SessionStore
    from retinue.tools import ToolRegistry

    from ._crash import CrashedBatch
    from ._waitgraph import Wait

__all__ = [
    "FLUSHING",
    "AgentCore",
    "AgentStatus",
    "LoopServices",
    "StepSignal",
    "TurnResult",
    "abort_reason",
    "abort_step",
    "driving_agent",
    "in_run_of",
    "resolve_source",
    "retire_step",
    "waiting_agent",
]

log = logging.getLogger("retinue.loop")


def in_run_of(token: trio.lowlevel.TrioToken) -> bool:
    """Whether the caller runs in *token*'s trio run, not a thread or a ``trio.run`` of its own."""
    return trio.lowlevel.in_trio_run() and trio.lowlevel.current_trio_token() is token


DEFAULT_MAX_PARALLEL_TOOL_CALLS = 10
"""How many tool calls of one step run at once unless ``max_parallel_tool_calls`` says."""
# Set by each driver in its own task, its tools and listeners inheriting it: elsewhere
# a lookup of the default is the whole cost.
_driving: ContextVar[AgentCore | None] = ContextVar("retinue_driving", default=None)
# The agent whose shielded flush the current task runs (its store's write and
# session/flush listeners): no disposal cancels a wait made there, so the agent's end
# waits for it. An agent, not a flag: a task the flush starts into a nursery that
# outlives it (an agent a listener creates, say) inherits it.
FLUSHING: ContextVar[AgentCore | None] = ContextVar("retinue_flushing", default=None)


def _run_token() -> trio.lowlevel.TrioToken | None:
    """The current trio run's token; ``None`` outside a run (a core built by a unit test)."""
    return trio.lowlevel.current_trio_token() if trio.lowlevel.in_trio_run() else None


def settle(items: Sequence[MailboxItem], result: TurnResult) -> None:
    """Answer the ``ask`` behind each item with *result*; never blocks."""
    for item in items:
        if item.ticket is not None:
            item.ticket.resolve(result)


@final
@attrs.define(eq=False)
class LoopServices:
    """What every agent of a runtime shares: hooks, tools, models, store and limits."""

    hooks: HookBus
    tools: ToolRegistry
    models: Model
    store: SessionStore
    sections: tuple[Section, ...] = ()
    variables: dict[str, str | None] = attrs.field(factory=dict)
    tool_order: tuple[str, ...] | None = None
    max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS
    flush_timeout: float = 30.0
    end_runtime: Callable[[], None] = attrs.field(default=lambda: None, kw_only=True)
    """Ends every agent of the runtime at once (its nursery's cancel, set by the runtime)."""

    def __attrs_post_init__(self) -> None:
        check_parallel_cap(self.max_parallel_tool_calls)

    def end_on_interrupt(self, exc: BaseException) -> None:
        """End the runtime if *exc* is Ctrl-C, before any prompt is answered (R12.10)."""
        if is_interrupt(exc):
            self.end_runtime()


def check_parallel_cap(value: object) -> int:
    """Validate ``max_parallel_tool_calls`` (R9.11, R13.2)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"max_parallel_tool_calls must be a positive integer, got {shown_short(value)}"
        )
    return value


class _QueuedInfo(ReadOnlyDict[str, object]):
    """The ``info`` of an ``agent/queued`` notification: a ``dict`` that refuses changes.

    Every listener of one send receives the same info, so a plain dict would let
    one change the source or steering flag the listeners after it see.
    """

    __slots__ = ()
    refusal = "agent/queued's info is read-only: copy it to change it, dict(info)"


def waiting_agent() -> AgentCore | None:
    """The agent a wait made by the current task holds up: the one whose driver runs
    it (a tool or listener), else the one whose teardown runs it; or None."""
    return driving_agent() or tearing_down_agent()


def driving_agent() -> AgentCore | None:
    """The agent whose driver runs the current task (in its tool or listener), or None."""
    core = _driving.get()
    # A task a tool started elsewhere inherits the mark without running under the
    # driver; the walk up the task tree settles it, and only marked callers pay it.
    if core is None or not core.in_own_driver():
        return None
    return core


@final
@attrs.define(eq=False)
class AgentCore:
    """State shared by an agent's verbs and its driver; the handle is ``agent``."""

    id: str
    options: AgentOptions
    session: Session
    services: LoopServices
    agent: AgentHandle | None = None
    status: AgentStatus = "idle"
    published: bool = False
    mailbox: Mailbox = attrs.field(factory=Mailbox)
    cancel_marker: bool = False
    cancel_reason: str | None = None
    disposed: bool = False
    disposed_event: trio.Event = attrs.field(factory=trio.Event)
    driver_exited: trio.Event = attrs.field(factory=trio.Event)
    driver_task: trio.lowlevel.Task | None = None
    """The task that runs the driver (and, below it, the agent's tool calls)."""
    torn_down: trio.Event = attrs.field(factory=trio.Event)
    disposal_started: bool = False
    idle_waiters: list[trio.Event] = attrs.field(factory=list)
    batch: list[MailboxItem] | None = None
    """The prompts the running turn took from the queue."""
    step_signal: StepSignal | None = None
    turn_scope: trio.CancelScope | None = None
    """The open turn's cancel scope, which disposal cancels even between step windows."""
    sections: tuple[Section, ...] = ()
    prefix: tuple[Message, ...] | None = None
    header_anchored: bool = False
    stored_config: LlmCallConfig | None = attrs.field(init=False)
    """The model config the session held when the agent was made on it (resumed or forked)."""
    flush_wanted: trio.Event = attrs.field(factory=trio.Event)
    """Wakes the flusher: for a flush owed, or to stop it."""
    flush_owed: bool = False
    """A background flush was requested and has not begun (R2.21, R12.9)."""
    flushed_upto: int = 0
    """How many events the last flush begun covers."""
    flush_failures: int = 0
    """The flushes that failed in a row: each failure is reported on ``agent/error``; the
    log warns of the 1st, 10th, 100th, ... and of the flush that ends the run."""
    flush_rounds: FlushRounds = attrs.field(factory=FlushRounds)
    crashed_batch: CrashedBatch | None = None
    """The batch a driver crash left unanswered, until its supervisor takes it."""
    flusher_interruption: BaseException | None = None
    """What the flusher began unwinding (a cancel from outside, Ctrl-C): a crash in the
    flush it then runs, or in its ending, hands it to the supervisor."""
    driver_interruption: BaseException | None = None
    """What the driver began unwinding outside a turn's own handling (a cancel, Ctrl-C)
    as it settles the prompts it holds: a crash in that hands it to the supervisor."""
    prompt_text: str | None = None
    waits_on: tuple[Wait, ...] = ()
    """The waits of this agent's tools or listeners on other agents (``ask``, ``wait_idle``)."""
    firm_waits_on: tuple[Wait, ...] = ()
    """Those of :attr:`waits_on` that disposing this agent does not cancel: made from
    its shielded flush or its teardown."""
    trio_token: trio.lowlevel.TrioToken | None = attrs.field(factory=_run_token)
    """The trio run the agent lives in, whose thread alone may call its verbs."""

    @stored_config.default
    def _stored_config(self) -> LlmCallConfig | None:
        header = self.session.current_header
        return None if header is None else header.config

    # -- verbs (synchronous: they never wait) ---------------------------------

    def check_thread(self) -> None:
        """Refuse a verb called off the trio thread, before it changes anything.

        Its mailbox and session wake trio tasks, which only the trio thread may
        do: half done from a worker thread, a verb would strand the driver.
        """
        if not trio.lowlevel.in_trio_run():
            raise RuntimeError(
                f"agent {self.id!r}: its verbs must be called from the trio thread; from a "
                "worker thread, call them through trio.from_thread.run_sync"
            )
        if (
            self.trio_token is not None
            and trio.lowlevel.current_trio_token() is not self.trio_token
        ):
            # Another run's thread (a trio.run a sync tool body started): its tasks are
            # not this run's, and waking the driver from there fails halfway.
            raise RuntimeError(
                f"agent {self.id!r}: its verbs must be called from its runtime's trio run, "
                "not from another trio.run (one a tool body started in its thread, say): "
                "call them outside that run"
            )

    def check_drivable(self) -> None:
        """Raise unless driving verbs are allowed now (R2.9, R2.37)."""
        if self.disposed:
            raise AgentDisposedError(f"agent {self.id!r} is disposed")
        if not self.published:
            raise AgentNotReadyError(f"agent {self.id!r} is not published yet")
        self.check_thread()

    def send(
        self,
        content: Content,
        source: MessageSource | str | None = None,
        *,
        ticket: Ticket[object] | None = None,
    ) -> None:
        """Queue a prompt for the next turn (R2.10); never blocks."""
        self.check_drivable()
        item = MailboxItem(as_prompt(content), resolve_source(source), ticket)
        self.mailbox.enqueue(item)
        self._emit_queued(item, steering=False)

    def steer(self, content: Content, source: MessageSource | str | None = None) -> None:
        """Steer the running turn, or queue like ``send`` when not running (R2.13-R2.15)."""
        self.check_drivable()
        if self.status != "running":
            self.send(content, source)
            return
        item = MailboxItem(as_prompt(content), resolve_source(source))
        self.mailbox.steer(item)
        self._emit_queued(item, steering=True)

    def _emit_queued(self, item: MailboxItem, *, steering: bool) -> None:
        """Emit ``agent/queued`` for *item*; its info is built only when a listener hears it."""
        hooks = self.services.hooks
        if hooks.hears("agent/queued", self.id):
            info = _QueuedInfo(source=item.source, steering=steering)
            hooks.emit("agent/queued", self.agent, item.content, info, scope=self.id)

    def inject(self, content: Content, source: MessageSource | str | None = None) -> None:
        """Record context without running the model (R2.16-R2.21)."""
        self.check_drivable()
        blocks, resolved = as_prompt(content), resolve_source(source)
        session = self.session
        if session.is_turn_open:
            session.append(ContextMessage(blocks, resolved), surface="append")
            return
        turn = session.next_turn_number()
        failure: Exception | None = None
        try:
            session.append(TurnStart(turn, TurnTrigger("injection", resolved)))
        except Exception as exc:
            if not (session.is_turn_open and session.last_turn == turn):
                raise
            failure = exc
        try:
            session.append(ContextMessage(blocks, resolved), surface="append")
        except Exception as exc:
            failure = failure or exc
        try:
            session.append(TurnEnd(turn, TurnEndReason.completed()))
        except Exception:
            log.exception("turn/end observer failed for agent %s (contained)", self.id)
        self.want_flush()
        if failure is not None:
            raise failure

    def cancel(self, reason: str | None = None) -> None:
        """Abort the running turn and discard pending input (R2.23-R2.28); never blocks."""
        if not self.disposed:  # which leaves nothing to cancel, on any thread
            self.check_thread()
        if not self.published and not self.disposed:
            raise AgentNotReadyError(f"agent {self.id!r} is not published yet")
        # Checked first: a refused call must change nothing.
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"cancel reason must be a str or None, got {shown_short(reason)}")
        # A str subclass is taken as the plain str a reloaded log reads, its own __str__
        # never called; an empty reason is none (R2.23): "cancelled ()" says nothing of why.
        text = "" if reason is None else str.__str__(reason)
        ended = TurnEndReason.aborted(text or "cancelled")
        armed = (
            self.status == "running"
            or self.step_signal is not None
            or self.mailbox.has_queued
            or self.mailbox.has_steering
        )
        if armed and not self.cancel_marker:
            # The first cause wins: a later cancel finds the turn cancelled already,
            # and only the prompts it discards are settled with its reason.
            self.cancel_marker = True
            self.cancel_reason = ended.reason
        self.discard_pending(ended)
        if armed:
            self.interrupt_turn()

    # -- driver-facing helpers ------------------------------------------------

    def interrupt_turn(self) -> None:
        """Abort the open step window, or between windows cancel the turn's scope; never blocks.

        Between windows (a continuation or turn-stop listener) no step signal is
        open, and a listener awaiting there would otherwise hold the turn.
        """
        if self.step_signal is not None:
            abort_step(self.step_signal)
        elif self.turn_scope is not None:
            self.turn_scope.cancel()

    def spend_cancel(self) -> None:
        """The armed cancel has ended its turn or start: the next one arms afresh (R7.8)."""
        self.cancel_marker = False
        self.cancel_reason = None

    def _flushing_every_event(self) -> bool:
        """Whether a background flush is in flight that began after the last event."""
        in_flight = self.flush_rounds.in_flight is not None and not self.flush_owed
        return in_flight and self.flushed_upto == len(self.session.events)

    def want_flush(self) -> None:
        """Ask the flusher for a background flush; it runs one even once told to stop."""
        self.flush_owed = True
        self.flush_wanted.set()

    def discard_pending(self, reason: TurnEndReason) -> None:
        """Clear both FIFOs, settling the tickets of discarded prompts (R2.25)."""
        settle(
            [*self.mailbox.drain_queued(), *self.mailbox.drain_steering()], TurnResult(0, reason)
        )

    def emit(self, name: str, *args: object) -> None:
        """Emit an ``agent/*`` notification with this agent first; failures contained."""
        hooks = self.services.hooks
        # Asked first: a status change or a send is rarely heard, and the call
        # with its arguments packed would cost more than the question. Whether
        # this agent is heard, not whether the seam is (a name the bus need not
        # check again: the loop's names are seams).
        if hooks.hears(name, self.id):
            hooks.emit(name, self.agent, *args, scope=self.id)

    def set_status(self, status: AgentStatus) -> None:
        """Change status; idle waiters are released before listeners run (R2.3, R2.33)."""
        if self.status == status or self.status == "disposed":
            return
        self.status = status
        if status != "running":
            self.release_idle_waiters()
        self.emit("agent/status", status)

    def release_idle_waiters(self) -> None:
        """Wake every ``wait_idle`` caller."""
        waiters, self.idle_waiters = self.idle_waiters, []
        for waiter in waiters:
            waiter.set()

    def in_own_driver(self) -> bool:
        """Whether the current task is this agent's running driver or a task below it
        (its tools and listeners), or runs for a sync tool body's thread of it through
        ``trio.from_thread``: such a caller cannot wait for the agent."""
        if self.driver_task is None or self.driver_exited.is_set():
            return False
        return runs_under(self.driver_task) or tool_thread_mark(self) is not None

    def enter_driver(self) -> None:
        """Mark the current task, and the tasks it starts, as this agent's driver."""
        _driving.set(self)

    def mark_disposed(self, *, announce: bool = True) -> None:
        """Disposal effects in order (R2.35); never raises.

        *announce* emits ``agent/status``: an agent whose creation failed was
        never announced, so its end is not either.
        """
        if self.disposed:
            return
        running = self.status == "running"
        self.disposed = True
        self.status = "disposed"
        self.disposed_event.set()
        self.release_idle_waiters()
        self.interrupt_turn()
        self.mailbox.wake()
        if not running and not self._flushing_every_event():
            # An idle agent's final flush is its flusher's (R12.9): the one in flight, if
            # it began after the last event, else one more. A running one's is the
            # driver's post-turn flush (R2.36): a second one beside it would run the
            # checkpoint twice and report its failure twice (R7.49).
            self.want_flush()
        if announce:
            self.emit("agent/status", "disposed")
