"""The driver: one task per agent for its whole life (R7.1-R7.8)."""

from __future__ import annotations

import logging

import trio

from retinue._errors import describe_failure, is_interrupt
from retinue.mailbox import MailboxItem
from retinue.session import TurnEndReason

from ._core import AgentCore, TurnResult, settle
from ._crash import CrashedBatch
from ._flush import flush, flush_shielded
from ._flushes import FlushRounds
from ._state import TurnState
from ._turn import run_turn

__all__ = ["run_flusher", "run_loop"]

log = logging.getLogger("retinue.loop")


async def run_loop(core: AgentCore) -> None:
    """Serve *core*'s mailbox until the agent is disposed.

    Turn failures never leave this function (R7.48); an exception escaping it
    is a bug, handled by the supervisor. On return the agent is quiescent and
    its pending prompts are settled ``disposed``, as they are when the runtime
    cancels the driver (R2.36, R12.10).
    """
    try:
        await _serve(core)
    except BaseException as exc:
        core.services.end_on_interrupt(exc)  # an agent/status listener's Ctrl-C, say
        if not isinstance(exc, Exception):
            # Cancelled with the runtime: no driver will serve these prompts again.
            # (A crash keeps them: the supervisor's next driver serves them.)
            core.driver_interruption = exc  # raised again after a crash settling them
            core.discard_pending(TurnEndReason.disposed())
        raise
    core.discard_pending(TurnEndReason.disposed())
    await trio.lowlevel.checkpoint()


async def _serve(core: AgentCore) -> None:  # noqa: ASYNC910 - returns only once disposed; run_loop checkpoints after it
    mailbox = core.mailbox
    if core.cancel_marker:
        # A cancel landed before this driver instance ran (on a fresh agent, or in
        # a restart pause): no wake-up is coming for it, so it passes window 1 now,
        # or its idle waiters wait forever and a steer sent after it is stranded.
        _cancelled_before_start(core, window=1)
    while not core.disposed:
        if not mailbox.has_queued:
            core.set_status("idle")
        await mailbox.wait_for_queued(core.disposed_event)
        if core.disposed:
            break
        if core.cancel_marker and _cancelled_before_start(core, window=1):
            continue
        if not mailbox.has_queued:
            continue
        core.set_status("running")
        if core.disposed:
            break
        if core.cancel_marker and _cancelled_before_start(core, window=2):
            continue
        # Readied before the drain: a crash readying it leaves the batch queued for the
        # restarted driver, where drained it would be lost, its asks never answered.
        state = TurnState(core, core.session.next_turn_number())
        items = core.batch = mailbox.drain_queued(core.options.max_prompts_per_turn)
        try:
            terminal = await _guarded_turn(core, state, items)
        except BaseException as exc:
            core.batch = None
            core.services.end_on_interrupt(exc)
            _leave_batch(core, state, items, exc)
            raise
        core.batch = None
        core.spend_cancel()
        if terminal:
            mailbox.drain_steering()
        else:
            mailbox.requeue_steering()


def _leave_batch(
    core: AgentCore, state: TurnState, items: list[MailboxItem], error: BaseException
) -> None:
    """Hand on the batch whose turn *error* escaped, a bug's or the runtime's cancel.

    A crash's is the supervisor's: it answers it once it has closed the turn in
    the log and flushed it, with what the log then says. A cancel's is answered
    ``disposed`` now, unless its turn answered it already with its logged end.
    """
    logged = core.session.last_turn >= state.turn
    # Taken off the state, whose frames its traceback holds: kept, the two are a cycle.
    # A Ctrl-C the turn's close held back is raised again after the crash; it wins over
    # a cancel from outside, which a crash's recovery lets go.
    interruption = state.interruption
    if state.ctrl_c is not None and (interruption is None or not is_interrupt(interruption)):
        interruption = state.ctrl_c
    state.interruption = state.ctrl_c = None
    if isinstance(error, Exception):
        if logged:
            failed = state.reason if state.error_recorded else None
            crashed = CrashedBatch(
                tuple(items),
                state.turn,
                state.step,
                state.blocked,
                interruption,
                failed,
            )
        else:
            crashed = CrashedBatch(tuple(items), interruption=interruption)
        core.crashed_batch = crashed
        return
    core.driver_interruption = error  # raised again after a crash settling the batch
    settle(items, TurnResult(state.turn if logged else 0, TurnEndReason.disposed()))


def _cancelled_before_start(core: AgentCore, *, window: int) -> bool:
    """Windows 1 and 2 (R7.4, R7.5): drop the cancelled start unless new work arrived."""
    core.spend_cancel()
    # The cancel discarded everything pending: a steer that came after it (the agent
    # still said "running") is new work and starts the turn (R3.10, R7.8).
    core.mailbox.requeue_steering()
    if core.mailbox.has_queued:
        return False
    if window == 1:
        core.release_idle_waiters()
    else:
        core.set_status("idle")
    return True


async def _guarded_turn(core: AgentCore, state: TurnState, items: list[MailboxItem]) -> bool:
    """Run turn *state* inside the backstop (R7.7): a failure before ``turn/start`` loses the batch."""
    turn = state.turn
    try:
        return await run_turn(core, state, items)
    except Exception as exc:
        if core.session.last_turn >= turn:
            # The turn was logged, so this is no pre-turn failure but a bug in
            # closing it: let the supervisor close the turn and restart (R7.47).
            raise
        log.warning("turn %d of agent %s failed before it opened: %s", turn, core.id, exc)
        core.emit("agent/error", turn, 0, exc)
        reason = TurnEndReason.error(0, describe_failure(exc), "TURN_NOT_OPENED")
        # No turn was logged, so none is named: the next one takes this number.
        settle(items, TurnResult(0, reason, error=exc))
        return False  # noqa: ASYNC910 - the batch is settled; the driver parks in wait_for_queued next, and a cancel here would settle it twice


async def run_flusher(core: AgentCore, stop: trio.Event) -> None:
    """Flush after idle injections (R2.21) until *stop* is set; a child of the agent.

    Set *stop*, then ``core.flush_wanted``, to end it once its flush in flight
    and the one owed, if any, are done: an inject or a disposal just before the
    driver exited is flushed before the agent is unregistered (R12.9).
    However it ends, every ``wait_idle`` waiting on the flush in flight is released;
    after a crash, one waiting on a flush requested meanwhile waits for the restarted flusher.
    """
    rounds = core.flush_rounds
    crashed = False
    try:
        while True:
            await core.flush_wanted.wait()
            core.flush_wanted = trio.Event()
            await _flush_owed(core, rounds)
            if stop.is_set():
                return
    except BaseException as exc:
        crashed = isinstance(exc, Exception)
        if not crashed:
            # Cancelled from outside (the runtime's teardown, Ctrl-C): a flush owed is
            # run first, shielded and bounded, as a dispose's would be (R2.21, R12.9).
            # (A crash leaves it owed to the restarted flusher.)
            # Raised again after a crash in that flush or in ending the rounds; a flusher
            # ending on it is never restarted, so it is never taken for a later crash's.
            core.flusher_interruption = exc
            await _flush_owed(core, rounds, interrupted=True)
        raise
    finally:
        if crashed:
            # Only the round in flight ended; one requested meanwhile is still owed
            # to the restarted flusher, which serves these rounds (or, given up, stops them).
            rounds.end_round()
        else:
            rounds.stop()


async def _flush_owed(core: AgentCore, rounds: FlushRounds, *, interrupted: bool = False) -> None:  # noqa: ASYNC910 - with nothing owed there is nothing to wait for: the flusher waits for a request next, or its cancel goes on
    """Run the flush owed; one owed during a round is run next, even once told to stop.

    *interrupted*: a cancel from outside (or Ctrl-C) unwinds the flusher.
    """
    run = flush_shielded if interrupted else flush
    while core.flush_owed:
        core.flush_owed = False
        rounds.begin()
        await run(core, core.session.last_turn, 0)
        rounds.end_round()
