"""The public agent handle: verbs, waiting, subscription and disposal."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from types import TracebackType
from typing import final

import trio

from retinue._errors import RetinueError
from retinue._handle import Content
from retinue._lossless import shown_short
from retinue._options import AgentOptions
from retinue._sources import MessageSource
from retinue.loop import AgentCore, AgentStatus, TurnResult
from retinue.loop._core import in_run_of
from retinue.loop._marks import tearing_down_agent
from retinue.mailbox import Ticket
from retinue.session import Event, Session

from ._waits import (
    abandon_ask,
    caller_that_may_wait,
    parent_scope,
    refuse_another_run,
    refuse_waiting_on_itself,
    refuse_waiting_on_own_setup,
    wait_as,
    wait_for_turn,
    waits_for_itself,
)

__all__ = ["Agent", "Subscription", "SubscriptionOverflowError"]


class SubscriptionOverflowError(RetinueError):
    """A subscriber fell more than its buffer behind the live log.

    ``next_seq`` is the seq of the first event the feed did not deliver: the
    events from there on are still in the session, ``agent.session.events[next_seq:]``,
    which a reader can take and then subscribe again, with no task switch
    between the two, to follow on without a gap.
    """

    code = "SUBSCRIPTION_OVERFLOW"

    def __init__(self, message: str, *, next_seq: int = 0) -> None:
        super().__init__(message)
        self.next_seq = next_seq


@final
class Subscription:
    """Live session events of one agent, in seq order, up to a bound behind the log.

    Iteration ends after the agent's last event, once it is torn down (its
    closing events included), or at its next step once the subscription is
    closed (events not yet read are dropped). Falling
    more than the buffer behind raises :class:`SubscriptionOverflowError`
    after the events that came before the gap, rather than losing events
    silently. Use as ``async with agent.subscribe() as events: async for e in events``
    (``contextlib.aclosing`` works too: :meth:`aclose` is :meth:`close` and a checkpoint).

    Like a trio memory channel, a feed nobody refers to any more (dropped
    without ``close()``) is released: neither the session nor the agent keeps it.
    """

    def __init__(
        self,
        session: Session,
        buffer: int,
        forget: Callable[[Subscription], None],
        run: trio.lowlevel.TrioToken | None = None,
    ) -> None:
        if type(buffer) is not int:
            # A bool is an int but no count; a float would compare fine and hold a fraction.
            raise TypeError(f"a subscription buffer is an int, got {shown_short(buffer)}")
        if buffer < 1:
            raise ValueError(f"a subscription buffer holds at least 1 event, got {buffer}")
        # The feed reads the log itself: a listener that appends while an event is
        # being announced is notified of its event first, but the log is in seq order.
        self._log = session.events
        self._cursor = len(self._log)
        self._end: int | None = None  # where the feed stops: its end or its gap
        self._overflow = False
        self._buffer = buffer
        self._waiting = trio.lowlevel.ParkingLot()
        # The agent's run, whose appends wake a parked reader: a reader parked in
        # another run's task would be woken from it, failing the append that woke it.
        self._run = run
        self._forget = forget
        self._unsubscribe: Callable[[], None] | None = _observe_weakly(session, self, run)

    def _agent_ended(self) -> None:
        """No more events will come: iteration ends after those logged (agent torn down).

        Not public: called on a live agent's feed from a worker thread, it would stop
        the feed, then fail to wake its reader, which would wait ever after.
        """
        self._stop_at(len(self._log))

    def _notice(self, event: Event) -> None:
        """Called by every append while the feed observes; never raises into it."""
        if self._end is None:
            if event.seq - self._cursor >= self._buffer:
                # The feed has a gap from here on: deliver what came before it, then raise.
                self._overflow = True
                self._stop_at(event.seq)
            elif self._waiting:
                self._waiting.unpark_all()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        await trio.lowlevel.checkpoint()
        while True:
            end = self._end
            if self._cursor < (len(self._log) if end is None else end):
                event = self._log[self._cursor]
                self._cursor += 1
                return event
            if end is not None:
                if self._overflow:
                    raise SubscriptionOverflowError(
                        f"subscriber fell more than {self._buffer} events behind the live "
                        f"log: events from seq {end} on were not delivered",
                        next_seq=end,
                    )
                raise StopAsyncIteration
            if self._run is not None and not in_run_of(self._run):
                raise RuntimeError(
                    "a subscription must be read in the trio run of its agent's runtime, not inside "
                    "another thread's trio.run"
                )
            await self._waiting.park()

    def close(self) -> None:
        """Stop receiving events; never blocks. Idempotent.

        Iteration ends at its next step, a task parked in it included: events
        logged before the close but not yet read are dropped.

        Raises:
            RuntimeError: called off the trio run of its agent's runtime (from a
                worker thread, or inside another ``trio.run``) while the feed is
                open, before anything changes: its reader, parked in that run,
                could not be woken from here.
        """
        if self._end is None and self._run is not None and not in_run_of(self._run):
            raise RuntimeError(
                "a subscription must be closed in the trio run of its agent's runtime: from a "
                "worker thread, go through trio.from_thread.run_sync"
            )
        self._overflow = False
        self._stop_at(self._cursor)
        self._forget(self)

    async def aclose(self) -> None:
        """:meth:`close`, then a checkpoint: a trio channel's ``aclose``, which
        ``contextlib.aclosing`` and ``async with`` call."""
        self.close()
        await trio.lowlevel.checkpoint()

    def _stop_at(self, end: int) -> None:
        if self._end is None or end < self._end:
            self._end = end
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()
        self._waiting.unpark_all()

    async def __aenter__(self) -> Subscription:
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _observe_weakly(
    session: Session, feed: Subscription, run: trio.lowlevel.TrioToken | None
) -> Callable[[], None]:
    """Observe *session* for *feed* without keeping *feed* alive; returns the unsubscriber.

    A task iterating the feed keeps it alive through its frame. Once the feed is
    collected, its observer leaves: at once when that happens in *run*, the
    agent's trio run (feeds dropped on an idle agent would otherwise pile up,
    each new one copying them all), else at the next append. The session
    notifies from a snapshot of its observers, so the others still get that
    event, in order.
    """

    def push(event: Event) -> None:
        live = feed_ref()
        if live is None:
            unsubscribe()
        else:
            live._notice(event)

    def dropped(_ref: object) -> None:
        # The collector may run on any thread, inside a trio.run of its own too (a sync
        # tool body's): only the agent's run changes the session.
        if in_run_of(run) if run is not None else trio.lowlevel.in_trio_run():
            unsubscribe()

    # A plain weak reference, not a WeakMethod: this runs per event for every live
    # feed, and a WeakMethod builds a bound method on every call (4x the cost).
    feed_ref = weakref.ref(feed, dropped)
    unsubscribe = session.observe(push)
    return unsubscribe


@final
class Agent:
    """A live agent. Created by the runtime (``rt.create_agent``), never by users.

    ``send``, ``steer``, ``inject`` and ``cancel`` are synchronous: they never wait.
    """

    # Weakly referable, as trio's tasks and nurseries are: per-agent state kept beside
    # the handle (a WeakKeyDictionary, a weakref.finalize) goes with the agent.
    __slots__ = ("__weakref__", "_core", "_dispose", "_subscriptions")

    def __init__(self, core: AgentCore, dispose: Callable[[Agent], Awaitable[None]]) -> None:
        self._core = core
        self._dispose = dispose
        # None once teardown has ended them: a later subscription ends at once. Weak:
        # a feed dropped without close() is released, not kept until the agent ends.
        self._subscriptions: weakref.WeakSet[Subscription] | None = weakref.WeakSet()
        core.agent = self

    @property
    def id(self) -> str:
        """The agent id, which is also its session id (R1.5)."""
        return self._core.id

    @property
    def options(self) -> AgentOptions:
        """The options the agent was created with."""
        return self._core.options

    @property
    def session(self) -> Session:
        """The agent's append-only session log."""
        return self._core.session

    @property
    def status(self) -> AgentStatus:
        """``"idle"``, ``"running"`` or ``"disposed"`` (not a "turn open" signal, R2.4)."""
        return self._core.status

    def send(self, content: Content, source: MessageSource | str | None = None) -> None:
        """Queue a prompt for the next turn (R2.10). Never blocks.

        *content* is a ``str``, a content block or a sequence of them; *source*
        is ``None`` (the user), a :class:`MessageSource` or a plugin's name.
        ``steer`` and ``inject`` raise as it does; ``cancel`` does not.

        Raises:
            TypeError: *content* or *source* is of none of those kinds.
            ValueError: *source* is an empty plugin name, ``"user"`` (``None`` is
                the user) or a :class:`MessageSource` of an empty kind; or *content*
                holds a tool call or a tool result, which only the agent's own steps log,
                or says nothing (no block, or only text of whitespace).
            AgentDisposedError: the agent is disposed (``AGENT_DISPOSED``, R2.37).
            AgentNotReadyError: its setup has not ended yet (``AGENT_NOT_READY``, R2.9).
            RuntimeError: called off the runtime's trio thread or run.
        """
        self._core.send(content, source)

    def steer(self, content: Content, source: MessageSource | str | None = None) -> None:
        """Steer the running turn between steps, or queue like ``send`` (R2.14). Never blocks.

        Takes and raises as ``send`` does.
        """
        self._core.steer(content, source)

    def inject(self, content: Content, source: MessageSource | str | None = None) -> None:
        """Add context without running the model (R2.16). Never blocks.

        Takes and raises as ``send`` does. It also raises what an observer of
        the session (a ``session/event`` listener too) raised on its
        ``turn/start`` or ``context/message``, once that event is logged and the
        turn an idle inject opened is closed (R2.19); a raise on that
        ``turn/end`` is logged and contained.
        """
        self._core.inject(content, source)

    def cancel(self, reason: str | None = None) -> None:
        """Abort the running turn and discard pending prompts (R2.23). Never blocks.

        *reason* (``"cancelled"`` when none or empty, a ``str`` subclass's plain text) is
        the aborted turn's reason. On an idle agent with nothing queued, and on a disposed
        one, it does nothing (R2.24; R2.37 refuses only the verbs that would deliver something).

        Raises:
            TypeError: *reason* is neither a ``str`` nor ``None``.
            AgentNotReadyError: its setup has not ended yet (``AGENT_NOT_READY``, R2.9).
            RuntimeError: called off the runtime's trio thread or run, before the
                agent is disposed.
        """
        self._core.cancel(reason)

    async def wait_idle(self) -> None:
        """Wait until no turn is running or queued and the last turn was flushed.

        The last turn may be an idle ``inject``, whose flush runs in the
        background (R2.21): it is waited for too (R7.2), and a failed one is
        reported on ``agent/error`` as ever, then counts as done. Returns at once
        when already idle and flushed (still a checkpoint). On a disposed
        agent, waits for its driver to exit and its teardown to finish.
        Cancellation leaves nothing behind.

        Raises:
            AgentError: called from the agent's own turn or flush, or, once
                disposed, from its own setup or teardown (its store's detach)
                or a task either waits for, which its end waits for
                (``WAITS_FOR_ITSELF``), or from a
                tool or listener of an agent this one already waits for,
                directly or through others (``WAIT_CYCLE``): either wait
                would never end. Only the waits a setup or teardown makes
                through its own task tree are known: a task it started in
                another nursery and waits for (by an Event, say), or a
                ``trio.from_thread`` call trio runs in a system task, waits
                here for good.
            RuntimeError: called off the runtime's trio run (inside another
                thread's ``trio.run``), before the agent is torn down.
        """
        core = self._core
        refuse_another_run(core)
        refuse_waiting_on_itself(core, "wait_idle")
        if not core.disposed and (core.status == "running" or core.mailbox.has_queued):
            await wait_for_turn(core)
        if not core.disposed:
            flushed = core.flush_rounds.waiter(requested=core.flush_owed)
            if flushed is not None:
                # From the agent's own flusher (a session/flush listener) this is refused.
                caller = caller_that_may_wait(core, "wait_idle")
                await wait_as(caller, core, flushed)
        if core.disposed:
            # Past the driver's exit: the final flush and unregistration are done too.
            # The teardown runs listeners of its own, which may wait on other agents.
            if not core.torn_down.is_set():
                refuse_waiting_on_own_setup(core, "wait_idle")
                if tearing_down_agent() is core:
                    raise waits_for_itself(core, "wait_idle", "teardown")
                caller = caller_that_may_wait(core, "wait_idle")
                await wait_as(caller, core, core.torn_down)
            await trio.lowlevel.checkpoint()
            return
        await trio.lowlevel.checkpoint()

    async def ask(self, content: Content, source: MessageSource | str | None = None) -> TurnResult:
        """Send a prompt and wait for the turn that consumed it to end and be flushed.

        Returns that turn's :class:`TurnResult`. If the prompt is discarded by
        ``cancel`` or disposal, the result says ``aborted`` / ``disposed``. After
        a driver crash it says what the log does, once the supervisor has closed
        the turn and flushed it: ``error`` (``DRIVER_CRASH``) for a turn the crash
        cut short, the turn's own end for one that had ended.
        Cancelling the wait does not withdraw the prompt; an ``ask`` already
        cancelled when it is called (its deadline past) sends nothing. But an
        ``ask`` made from another agent's tool or listener that the other
        agent's cancel or disposal interrupts goes with that agent's turn: the
        prompt is withdrawn while queued (answered ``aborted``), or a turn that
        took it alone is aborted, its reason naming the parent; the rest of this
        agent's queue stays.

        Agents may ask each other from their tools, but never in a circle: while
        a tool or listener of agent X waits here, X counts as waiting for this
        agent, and an ``ask`` or ``wait_idle`` that would close a circle of
        such waits is refused rather than left to wait forever.

        Raises:
            AgentError: called from the agent's own turn (``WAITS_FOR_ITSELF``),
                or from a tool or listener of an agent this one already waits
                for, directly or through others (``WAIT_CYCLE``; the message
                names the agents in the circle). Nothing is sent.
            TypeError, ValueError: *content* or *source*, as for ``send``.
            AgentDisposedError, AgentNotReadyError, RuntimeError: as ``send``;
                a prompt that was sent and then discarded by a disposal is
                answered ``disposed`` instead.
        """
        core = self._core
        refuse_another_run(core)
        refuse_waiting_on_itself(core, "ask")
        caller = caller_that_may_wait(core, "ask")
        # As a channel's send: a call cancelled (past its deadline) before it begins
        # does nothing, rather than pay for a turn whose answer nobody reads.
        await trio.lowlevel.checkpoint_if_cancelled()
        ticket: Ticket[object] = Ticket()
        core.send(content, source, ticket=ticket)
        if caller is None:
            await ticket.done.wait()  # the usual asker, not an agent: no helper to await
        else:
            await wait_as(
                caller,
                core,
                ticket.done,
                partial(abandon_ask, core, caller, ticket, parent_scope(caller)),
            )
        result = ticket.take()
        assert isinstance(result, TurnResult)
        return result

    def subscribe(self, *, buffer: int = 10_000) -> Subscription:
        """Return a live feed of this agent's session events from now on (bounded buffer).

        Raises:
            TypeError: *buffer* is not an int (a bool is not taken for one).
            ValueError: *buffer* is less than 1.
            RuntimeError: called off the runtime's trio run, before the agent is torn down.
        """
        core = self._core
        if self._subscriptions is not None:
            refuse_another_run(core)
        subscription = Subscription(core.session, buffer, self._forget, core.trio_token)
        if self._subscriptions is None:
            subscription._agent_ended()
        else:
            self._subscriptions.add(subscription)
        return subscription

    async def dispose(self) -> None:
        """Stop the agent, close and flush its turn, and unregister it (R2.35, R12.9).

        Idempotent and memoized: every caller waits for the same teardown, which
        runs in the runtime's nursery: cancelling a caller ends only its wait, the
        teardown still completes. On the runtime's run it raises nothing but that cancellation.
        Called from the agent's own turn (its tool or a listener running under its
        driver), its setup or its teardown (its store's detach), it stops the agent
        and returns at once: waiting there would wait for itself. The teardown then
        completes when the driver has exited. So does a call from another agent's
        tool, listener or teardown that this one waits for, directly or through
        others, in a wait its disposal does not cancel (its final flush's listener
        or its teardown disposing that agent, say): waiting there would wait in a
        circle. A wait its disposal cancels (its tool's ``ask``) ends with it, and
        the call waits for the teardown as any other. Only the waits a setup or
        teardown makes through its own task tree are known: from a task it started
        in another nursery, or a ``trio.from_thread`` call trio runs in a system
        task, the call waits as any other, aborting a setup, and a teardown or a
        shielded setup waiting for that task (by an Event, say) waits for good.

        Raises:
            RuntimeError: called off the runtime's trio run (inside another thread's
                ``trio.run``), before the agent is torn down.
        """
        refuse_another_run(self._core)
        await self._dispose(self)

    def _end_subscriptions(self) -> None:
        """End every live subscription after the agent's last event (its runtime's, at teardown).

        Not a verb of the handle: called on a live agent, it would end every feed
        of it, and every later one at once, while the agent goes on.
        """
        subscriptions, self._subscriptions = self._subscriptions, None
        if subscriptions is not None:
            for subscription in list(subscriptions):
                subscription._agent_ended()

    def _forget(self, subscription: Subscription) -> None:
        if self._subscriptions is not None:
            self._subscriptions.discard(subscription)

    def __repr__(self) -> str:
        core = self._core
        return f"<Agent {core.id!r} status={core.status} events={len(core.session.events)}>"
