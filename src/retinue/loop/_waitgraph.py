"""Which agents wait on which: the records behind the refusal of a circle of agents
waiting on each other (``WAIT_CYCLE``).

Each wait a task of an agent's makes on another agent (an ``ask``, a ``wait_idle``, a
wait for a flush or a teardown) is recorded on the waiting agent while it lasts. A
new wait is refused when the agent it waits on already waits, directly or through
others, on the one that would wait.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import trio

from retinue._errors import AgentError

from ._core import FLUSHING
from ._marks import tearing_down_agent
from ._toolcall import tool_thread_mark

if TYPE_CHECKING:
    from ._core import AgentCore

__all__ = ["Wait", "circle_error", "wait_cycle", "waiting_on", "waits_firmly"]


class Wait(NamedTuple):
    """One wait of a task of an agent's on *target*, over once *until* (if any) is set."""

    target: AgentCore
    until: trio.Event | None
    """What the waiting task waits for: set, the wait is over though the task has not run
    since (it may be one of many woken together), and counts toward no circle."""

    def over(self) -> bool:
        """Whether what the wait waits for has happened."""
        return self.until is not None and self.until.is_set()


def circle_error(caller: AgentCore, cycle: list[AgentCore], waiting: str) -> AgentError:
    """``WAIT_CYCLE``: *caller* *waiting* (what it waits for) would close *cycle*."""
    circle = " -> ".join(repr(member.id) for member in [caller, *cycle])
    return AgentError(
        f"agent {caller.id!r}: {waiting} would wait forever in a circle of agents "
        f"waiting on each other ({circle})",
        code="WAIT_CYCLE",
    )


def wait_cycle(caller: AgentCore, target: AgentCore) -> list[AgentCore] | None:
    """The agents from *target* back to *caller*, if *target* already waits on it.

    A depth-first walk of the waits of *target*, the agents those wait on, and
    so on; every agent is visited once, and a wait that is over (see
    :class:`Wait`) is left out. Of a disposed agent (one a dispose has just
    marked, say) only the firm waits count: its disposal cancels the others,
    which end with it.
    """
    parents: dict[AgentCore, AgentCore | None] = {target: None}
    pending = [target]
    while pending:
        core = pending.pop()
        if core is caller:
            chain = [core]
            while (parent := parents[chain[-1]]) is not None:
                chain.append(parent)
            return chain[::-1]
        waits = core.firm_waits_on if core.disposed else core.waits_on
        for wait in waits:
            nxt = wait.target
            if nxt not in parents and not wait.over():
                parents[nxt] = core
                pending.append(nxt)
    return None


def waits_firmly(caller: AgentCore) -> bool:
    """Whether a wait the current task makes is firm: made from *caller*'s shielded
    flush or its teardown, which no cancel of its turn or disposal reaches."""
    return FLUSHING.get() is caller or tearing_down_agent() is caller


def _without_one(waits: tuple[Wait, ...], wait: Wait) -> tuple[Wait, ...]:
    left = list(waits)
    left.remove(wait)
    return tuple(left)


@contextlib.contextmanager
def waiting_on(
    caller: AgentCore,
    target: AgentCore,
    abandoned: Callable[[], None] | None = None,
    until: trio.Event | None = None,
) -> Iterator[None]:
    """Record *caller* as waiting for *target* inside the ``with``, until *until* is
    set if given (see :class:`Wait`).

    From a sync tool body's thread (through ``trio.from_thread``), only while its
    call lasts: a body abandoned at its timeout or a cancel waits on, but its
    agent no longer does, and must not close circles of agents waiting on each other;
    *abandoned* is called then.
    """
    wait = Wait(target, until)
    caller.waits_on = (*caller.waits_on, wait)
    firm = waits_firmly(caller)
    if firm:
        caller.firm_waits_on = (*caller.firm_waits_on, wait)
    waiting = True

    def stop_waiting() -> None:
        nonlocal waiting
        if waiting:
            waiting = False
            caller.waits_on = _without_one(caller.waits_on, wait)
            if firm:
                caller.firm_waits_on = _without_one(caller.firm_waits_on, wait)

    def body_left() -> None:
        stop_waiting()
        if abandoned is not None:
            abandoned()

    mark = tool_thread_mark(caller)
    if mark is not None:
        mark.releases = (*mark.releases, body_left)
    try:
        yield
    finally:
        stop_waiting()
        if mark is not None and body_left in mark.releases:
            mark.releases = tuple(release for release in mark.releases if release is not body_left)
