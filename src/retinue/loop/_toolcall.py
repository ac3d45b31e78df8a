"""The tool call a task serves, read by the ``trio.from_thread`` tasks of a sync body's thread."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import final

import trio

__all__ = [
    "ToolCallMark",
    "enter_tool_call",
    "leave_tool_call",
    "tool_thread_mark",
]


@final
class ToolCallMark:
    """One running tool call of *owner* (an agent's core); ``live`` until its body is left."""

    __slots__ = ("live", "owner", "releases")

    def __init__(self, owner: object) -> None:
        self.owner = owner
        self.live = True
        # A tuple, rebuilt on the rare change: the empty one is shared, where a list
        # would be one more object per call for the cyclic collector to traverse.
        self.releases: tuple[Callable[[], None], ...] = ()
        """Run when the body is left: the waits its thread made stop counting as the agent's."""


# Set by the task that awaits a tool's body: a sync body's worker thread copies it, and
# so does every task trio.from_thread starts for that thread.
_calling: ContextVar[ToolCallMark | None] = ContextVar("retinue_tool_call", default=None)


def enter_tool_call(owner: object) -> tuple[ToolCallMark, Token[ToolCallMark | None]]:
    """Mark the current task as running a tool call of *owner*; give both to :func:`leave_tool_call`."""
    mark = ToolCallMark(owner)
    return mark, _calling.set(mark)


def leave_tool_call(mark: ToolCallMark, token: Token[ToolCallMark | None]) -> None:
    """The call's body is left (answered, failed or abandoned): its thread no longer holds it."""
    mark.live = False
    _calling.reset(token)
    # A body abandoned at a timeout or cancel runs on, still waiting, but its agent no
    # longer does: its waits must not close circles of agents waiting on each other.
    releases, mark.releases = mark.releases, ()
    for release in releases:
        release()


def tool_thread_mark(owner: object) -> ToolCallMark | None:
    """The live tool call of *owner* whose worker thread the current task serves, or ``None``.

    trio runs a ``trio.from_thread`` call in a system task, outside the task tree of
    the tool call (for a body its cancel may abandon), with the thread's context:
    the body blocks until the task returns, and the call with it.
    """
    mark = _calling.get()
    if mark is None or not mark.live or mark.owner is not owner:
        return None
    # The system task trio.from_thread started for the thread, or a task below it: the
    # call's own tasks, and the run's main task, are not under the root task's nursery
    # with the mark in their own context.
    top = _top_level_task()
    if top is None or top.context.get(_calling) is not mark:
        return None
    return mark


def _top_level_task() -> trio.lowlevel.Task | None:
    """The ancestor of the current task (or itself) that the root task started, if any."""
    root = trio.lowlevel.current_root_task()
    task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
    while task is not None:
        nursery = task.parent_nursery
        parent = None if nursery is None else nursery.parent_task
        if parent is root:
            return task
        task = parent
    return None
