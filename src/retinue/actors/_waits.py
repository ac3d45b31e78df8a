"""The checks and waits behind an agent's waiting verbs (``wait_idle``, ``ask``): a wait
that would never end is refused, and a wait made by another agent's tool or listener is
recorded, so that agents never wait on each other in a circle; the work such a wait
asked for ends with the waiting agent's turn."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import trio

from retinue._errors import AgentError
from retinue.loop import AgentCore, TurnResult
from retinue.loop._core import settle, waiting_agent
from retinue.loop._marks import setting_up_agents
from retinue.loop._waitgraph import circle_error, wait_cycle, waiting_on, waits_firmly
from retinue.mailbox import Ticket
from retinue.session import TurnEndReason

__all__ = [
    "abandon_ask",
    "caller_that_may_wait",
    "parent_scope",
    "refuse_another_run",
    "refuse_waiting_on_itself",
    "refuse_waiting_on_own_setup",
    "wait_as",
    "wait_for_turn",
    "waits_for_itself",
]


def refuse_another_run(core: AgentCore) -> None:
    """Refuse a wait made off the agent's trio run (inside another thread's ``trio.run``).

    Its waiter would be woken from the agent's run, which fails there: in the
    driver, crashing it, or inside trio. Once the agent is torn down nothing
    wakes a waiter any more, so any run may wait for that.
    """
    if not core.torn_down.is_set():
        core.check_thread()


def refuse_waiting_on_itself(core: AgentCore, verb: str) -> None:
    """From its own turn (a tool or listener) the agent would wait for itself forever."""
    # Its driver runs only while the agent says "running", or "disposed" during the
    # final flush: the cheap test spares the walk up the task tree on the common
    # path (asking an idle agent).
    if core.status != "idle" and core.in_own_driver():
        raise waits_for_itself(core, verb, "turn")


def refuse_waiting_on_own_setup(core: AgentCore, verb: str) -> None:
    """An agent disposed during its setup ends with its creation, which waits for the setup."""
    # Once published, its teardown no longer waits for any setup, even one it started from.
    if not core.published and core in setting_up_agents():
        raise waits_for_itself(core, verb, "setup")


def waits_for_itself(core: AgentCore, verb: str, where: str) -> AgentError:
    return AgentError(
        f"agent {core.id!r}: {verb} from the agent's own {where} would wait for itself",
        code="WAITS_FOR_ITSELF",
    )


def caller_that_may_wait(core: AgentCore, verb: str) -> AgentCore | None:
    """The agent whose tool or listener is calling (None outside any agent), once its
    wait on *core* is known not to close a circle of agents waiting on each other."""
    caller = waiting_agent()
    if caller is None:
        return None
    if caller is core:
        # The own-turn check above only looks while the agent is running.
        raise waits_for_itself(core, verb, "turn")
    cycle = wait_cycle(caller, core)
    if cycle is not None:
        raise circle_error(caller, cycle, f"{verb} on agent {core.id!r}")
    return caller


async def wait_for_turn(core: AgentCore) -> None:
    """Wait for *core*'s next transition out of running (R2.32)."""
    caller = caller_that_may_wait(core, "wait_idle")
    waiter = trio.Event()
    core.idle_waiters.append(waiter)
    try:
        await wait_as(caller, core, waiter)
    except BaseException:
        # Cancelled before the agent went idle: withdraw the waiter, or every
        # cancelled poll of a long turn would stay queued until it ends.
        if not waiter.is_set():  # a released waiter has left the list already
            with contextlib.suppress(ValueError):
                core.idle_waiters.remove(waiter)
        raise


async def wait_as(
    caller: AgentCore | None,
    core: AgentCore,
    done: trio.Event,
    abandoned: Callable[[], None] | None = None,
) -> None:
    """Wait for *done*; while a *caller* agent waits, it is recorded as waiting on *core*.

    *abandoned* is called if the caller gives the wait up: its task is cancelled, or
    the sync tool body whose thread waits here is abandoned. Once *done* is set the
    wait counts toward no circle, though this task has not run since: meanwhile
    *core* may ask the caller.
    """
    if caller is None:
        await done.wait()
        return
    with waiting_on(caller, core, abandoned, until=done):
        try:
            await done.wait()
        except trio.Cancelled:
            if abandoned is not None:
                abandoned()
            raise


def parent_scope(caller: AgentCore) -> trio.CancelScope | None:
    """The scope of *caller*'s turn that an ``ask`` made now runs under, if any: its
    cancel (the caller's cancel or disposal) is the cause that ends the work asked for.

    None in the caller's flush or teardown: no cancel of its turn reaches a wait there.
    """
    return None if waits_firmly(caller) else caller.turn_scope


def abandon_ask(
    core: AgentCore, parent: AgentCore, ticket: Ticket[object], scope: trio.CancelScope | None
) -> None:
    """A tool or listener of *parent* gave up waiting for the ``ask`` of *core* behind *ticket*.

    When *parent*'s turn *scope* (see :func:`parent_scope`) was cancelled, by
    its cancel or disposal, the work it asked for goes with it (R2.29's parent
    cause): the prompt is withdrawn while still queued, answered ``aborted``;
    a turn that took it alone is aborted, the rest of the queue left to run,
    unless it has ended and only its flush is left. A
    turn that took other prompts with it runs on for them. Any other give-up
    (the caller's own deadline) leaves the prompt to its turn, as an ``ask``
    from outside any agent does.
    """
    if core.disposed or ticket.done.is_set() or scope is None or not scope.cancel_called:
        return
    ended = TurnEndReason.aborted(_parent_cause(parent))
    item = core.mailbox.withdraw(ticket)
    if item is not None:
        settle([item], TurnResult(0, ended))
        if core.status != "running" and not core.mailbox.has_queued:
            # Woken for the prompt, the driver finds nothing and stays idle: a wait_idle
            # made meanwhile would wait for a turn that never comes.
            core.release_idle_waiters()
        return
    batch = core.batch
    if batch is None or len(batch) != 1 or batch[0].ticket is not ticket:
        return
    if not core.session.is_turn_open:
        # Its turn/end is logged (the batch's turn/start is logged as it is drained, with
        # no checkpoint between): only its flush is left, and the answer is that end.
        # Steering sent since is the next turn's prompt (R3.10), not the ended turn's.
        return
    if not core.cancel_marker:
        # As cancel does, but the queue's other prompts (other callers') stay.
        core.cancel_marker = True
        core.cancel_reason = ended.reason
        core.mailbox.drain_steering()  # addressed to the turn that ends
        core.interrupt_turn()


def _parent_cause(parent: AgentCore) -> str:
    if parent.disposed:
        return f"parent agent {parent.id!r} was disposed"
    why = parent.cancel_reason
    if why is None or why == "cancelled":
        return f"parent agent {parent.id!r} was cancelled"
    return f"parent agent {parent.id!r} was cancelled: {why}"
