"""What a runtime runs as an agent goes: its scoped listeners, tools and cleanups."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from functools import partial

from retinue._errors import synchronous_failure
from retinue._lossless import shown
from retinue.actors import Agent
from retinue.hooks import HookBus, agent_scope
from retinue.loop import LoopServices

from ._creation import core_of

__all__ = ["Cleanups", "bus_of", "run_each", "scoped_cleanup", "unwind"]

log = logging.getLogger("retinue.supervisors")

Cleanups = dict[str, dict[object, Callable[[], None]]]
"""Per agent, in registration order; keyed so one run early leaves at once."""


def bus_of(agent: object) -> HookBus | None:
    """The bus *agent*'s dispatches are made on, if it is an agent handle.

    Given to a runtime's bus, so that a listener, tool or guard scoped to
    another runtime's agent is refused as a cleanup tied to one is.
    """
    return core_of(agent).services.hooks if isinstance(agent, Agent) else None


def scoped_cleanup(
    services: LoopServices, cleanups: Cleanups, agent: Agent, unregister: Callable[[], None]
) -> Callable[[], None]:
    """Hold *unregister* among *agent*'s *cleanups*; returns what runs it early (idempotent).

    Raises ``AgentDisposedError`` for a disposed *agent*, ``TypeError`` for
    an *agent* that is no handle or an *unregister* that is not callable, and
    ``ValueError`` for another runtime's *agent* (the runtime of *services*
    holds the cleanups), as :meth:`Runtime.scoped` says.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"agent must be an Agent (from create_agent), got {shown(agent)}")
    if core_of(agent).services is not services:
        # Held here, it would never run: that agent's teardown unwinds its own runtime's.
        raise ValueError(f"agent {agent.id!r} belongs to another runtime")
    if not callable(unregister):
        raise TypeError(f"unregister must be a callable, got {shown(unregister)}")
    agent_scope(agent)
    held = cleanups.setdefault(agent.id, {})
    key = object()
    held[key] = unregister

    def now() -> None:
        if held.pop(key, None) is not None:
            unregister()

    return now


def unwind(services: LoopServices, cleanups: Cleanups, agent_id: str) -> None:
    """Drop *agent_id*'s scoped listeners and tools, then run its cleanups, newest first.

    Ctrl-C raised by one of them (a cleanup, a hook watcher told of a dropped
    listener) is raised again once the rest have run.
    """
    held = cleanups.pop(agent_id, {})

    def each() -> Iterator[Callable[[], None]]:
        yield partial(services.hooks.drop_scope, agent_id)
        yield partial(services.tools.drop_scope, agent_id)
        # Emptied as it runs, newest first: a cleanup may run another's early (which
        # then finds it gone), and one run early later finds itself gone too.
        while held:
            yield held.popitem()[1]

    interrupt = run_each(each(), agent_id, "cleanup")
    if interrupt is not None:
        raise interrupt


def run_each(steps: Iterable[Callable[[], None]], agent_id: str, what: str) -> BaseException | None:
    """Run every one of an agent's teardown *steps* past the failures of those before it.

    Nothing of the agent may stay behind, whatever a step raises (a listener's or a
    cleanup's Ctrl-C, a SystemExit, a bug): a subscriber would wait for good, the
    store would hold the session attached, and a failure raised on would end the
    runtime's nursery, and every other agent with it. A failure is logged as the
    agent's *what*; the first Ctrl-C is returned, for the caller to raise once done.
    """
    interrupt: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as exc:
            if not synchronous_failure(exc):
                interrupt = interrupt or exc
                continue
            log.exception("%s of agent %s failed (contained)", what, agent_id)
    return interrupt
