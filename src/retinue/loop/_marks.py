"""Which agent's setup or teardown the current task is part of: the task that runs it, or
one started in a nursery that task waits for."""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, final

import attrs
import trio

if TYPE_CHECKING:
    from ._core import AgentCore

__all__ = [
    "SETTING_UP",
    "TEARING_DOWN",
    "enter_setup",
    "enter_teardown",
    "runs_under",
    "setting_up_agents",
    "tearing_down_agent",
]


def runs_under(ancestor: trio.lowlevel.Task, outside: tuple[trio.Nursery, ...] = ()) -> bool:
    """Whether the current task is *ancestor* or was started, at any depth, in a nursery
    *ancestor* waits for: any of its own but the *outside* ones."""
    task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
    while task is not None:
        if task is ancestor:
            return True
        nursery = task.parent_nursery
        if nursery is None or (nursery.parent_task is ancestor and nursery in outside):
            return False
        task = nursery.parent_task
    return False


@final
@attrs.frozen(eq=False)
class _Mark:
    """An agent's setup or teardown, run by *task*."""

    core: AgentCore
    task: trio.lowlevel.Task
    # The nurseries *task* held before: a setup runs in its caller's task, and a task
    # started in a nursery the caller opened earlier is no part of it.
    outside: tuple[trio.Nursery, ...] = ()

    def holds(self) -> bool:
        return runs_under(self.task, self.outside)


# Set where a setup or teardown begins and copied into every task started from there,
# even into a nursery that outlives it (one of the user's, by a listener): the walk up
# the task tree settles whether the setup or teardown waits for the task, and only
# marked tasks pay for it.
SETTING_UP: ContextVar[tuple[_Mark, ...]] = ContextVar("retinue_setting_up", default=())
TEARING_DOWN: ContextVar[_Mark | None] = ContextVar("retinue_tearing_down", default=None)


def enter_setup(core: AgentCore) -> Token[tuple[_Mark, ...]]:
    """Mark the current task as running *core*'s setup, inside any it already runs."""
    task = trio.lowlevel.current_task()
    mark = _Mark(core, task, tuple(task.child_nurseries))
    return SETTING_UP.set((*SETTING_UP.get(), mark))


def enter_teardown(core: AgentCore) -> Token[_Mark | None]:
    """Mark the current task as running *core*'s teardown."""
    return TEARING_DOWN.set(_Mark(core, trio.lowlevel.current_task()))


def setting_up_agents() -> tuple[AgentCore, ...]:
    """The agents whose setups wait for the current task, outermost first: each creation
    waits for its setup, and so for every setup nested in it."""
    return tuple(mark.core for mark in SETTING_UP.get() if mark.holds())


def tearing_down_agent() -> AgentCore | None:
    """The agent whose teardown waits for the current task (its store's detach), or None."""
    mark = TEARING_DOWN.get()
    return mark.core if mark is not None and mark.holds() else None
