"""Each seam's listeners, shared and scoped to one agent, and the scope an ``agent=`` names."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from retinue._errors import AgentDisposedError
from retinue._lossless import shown_short
from retinue._session_ids import id_problem

from ._seams import Listener

__all__ = ["Entry", "Seam", "agent_scope"]


@attrs.define(eq=False, slots=True)
class Entry:
    """One registration on a seam (a listener, or a tool guard): what, for whom, and when."""

    fn: Listener
    scope: str | None
    order: int
    """Registration order across the whole bus: scoped and shared listeners interleave by it."""


def _order(entry: Entry) -> int:
    return entry.order


@attrs.define(eq=False, slots=True)
class Seam:
    """One seam's listeners: shared ones, and each scope's own.

    Split by scope so that a dispatch, a ``hears`` and an agent's teardown
    touch only the shared listeners and that agent's, however many agents
    have listeners of their own. Each table is keyed by registration order,
    which is unique on a bus: an unregister finds its entry at once, however
    many listeners the seam has, and the table keeps registration order.
    """

    shared: dict[int, Entry] = attrs.field(factory=dict)
    scoped: dict[str, dict[int, Entry]] = attrs.field(factory=dict)

    def add(self, entry: Entry) -> None:
        if entry.scope is None:
            self.shared[entry.order] = entry
        else:
            self.scoped.setdefault(entry.scope, {})[entry.order] = entry

    def remove(self, entry: Entry) -> bool:
        """Remove *entry* if present; whether it was."""
        entries = self.shared if entry.scope is None else self.scoped.get(entry.scope)
        if entries is None or entries.get(entry.order) is not entry:
            return False
        del entries[entry.order]
        if not entries and entry.scope is not None:
            del self.scoped[entry.scope]
        return True

    def heard_by(self, scope: str | None) -> bool:
        return bool(self.shared) or (scope is not None and scope in self.scoped)

    def reached(self, scope: str | None) -> list[Listener]:
        """The listeners *scope*'s dispatch reaches, in registration order (a new list)."""
        own = self.scoped.get(scope) if scope is not None else None
        # Each table copied in one step before the listeners are read out of it: a
        # registration made meanwhile from another thread must not end the dispatch
        # with "dictionary changed size during iteration".
        shared = tuple(self.shared.values())
        if not own:
            return [entry.fn for entry in shared]
        scoped = tuple(own.values())
        if not shared:
            return [entry.fn for entry in scoped]
        return [entry.fn for entry in sorted((*shared, *scoped), key=_order)]

    def __bool__(self) -> bool:
        return bool(self.shared or self.scoped)


def agent_scope(
    agent: object,
    foreign: Callable[[object], bool] | None = None,
    *,
    argument: str = "agent=",
    query: bool = False,
) -> str | None:
    """The scope an ``agent=`` argument names: ``None``, an agent id, or a handle's id.

    *foreign* tells a handle of an agent dispatched elsewhere (another runtime's),
    which is refused: scoped by its id here, what is registered would never hear
    it, would hear an agent of the same id here instead, and would outlive its
    teardown. An id is taken as it is: it names an agent wherever it is used.
    A string no session id can be (empty, or holding a control character, say) is
    refused: no agent has it (R11.12), so nothing scoped to it would ever be heard.
    A *query* (of the listeners scoped, say) registers nothing: it takes the empty
    string and a disposed handle. Errors name the caller's *argument*.

    Raises:
        TypeError: *agent* is none of those.
        ValueError: *agent* is a handle *foreign* tells apart, disposed or not;
            or a string no agent id can be.
        AgentDisposedError: *agent* is a disposed handle; whatever is scoped to it
            would outlive its teardown and be heard by a later agent of that id.
    """
    if agent is None:
        return None
    if isinstance(agent, str):
        if not query and (problem := id_problem(agent)) is not None:
            raise ValueError(f"{argument} {shown_short(agent)} names no agent: it {problem}")
        return agent
    agent_id = getattr(agent, "id", None)
    if not isinstance(agent_id, str):
        raise TypeError(
            f"{argument} takes an agent handle, an agent id (a str) or None, got {agent!r}"
        )
    if foreign is not None and foreign(agent):
        raise ValueError(f"agent {agent_id!r} belongs to another runtime")
    if not query and getattr(agent, "status", None) == "disposed":
        raise AgentDisposedError(f"agent {agent_id!r} is disposed: nothing can be scoped to it")
    return agent_id
