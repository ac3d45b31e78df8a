"""Guards: checks that may still deny a tool call every pre-execute listener allowed (R9.3).

A ``tools/pre-execute`` listener that allows without calling ``next`` ends the
chain: listeners after it never see the call. A guard is monotonic instead:
it can only deny, and it is asked whatever the listeners decided, so a
policy registered as a guard cannot be waived by another listener's
``Allow``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

import attrs

from retinue._errors import HookError
from retinue.hooks import Deny

from ._execution import ToolExecution

__all__ = ["Guard", "Guards"]

Guard: TypeAlias = Callable[[ToolExecution], "Deny | Awaitable[Deny | None] | None"]
"""A guard: ``None`` lets the call through, a :class:`~retinue.hooks.Deny` refuses it."""


@final
@attrs.define(eq=False)
class Guards:
    """The guards of one registry: global ones, then those scoped to the calling agent."""

    _global: list[Guard] = attrs.field(factory=list, init=False)
    _scoped: dict[str, list[Guard]] = attrs.field(factory=dict, init=False)

    def add(self, guard: Guard, scope: str | None) -> Callable[[], None]:
        """Register *guard* globally (*scope* ``None``) or for one agent; returns its remover."""
        if not callable(guard):
            raise TypeError(f"a guard must be callable, got {type(guard).__name__}")
        table = self._global if scope is None else self._scoped.setdefault(scope, [])
        table.append(guard)

        def remove() -> None:
            if guard in table:
                table.remove(guard)
                if scope is not None and not table and self._scoped.get(scope) is table:
                    del self._scoped[scope]

        return remove

    def drop_scope(self, scope: str) -> None:
        """Forget every guard scoped to *scope* (its agent's teardown)."""
        self._scoped.pop(scope, None)

    def watch(self, agent_id: str | None) -> bool:
        """Whether any guard applies to a call of *agent_id*."""
        return bool(self._global) or (agent_id is not None and agent_id in self._scoped)

    async def denial(self, execution: ToolExecution) -> Deny | None:
        """The first guard's denial of *execution* in registration order, or ``None``.

        Raises:
            HookError: a guard returned something other than ``None`` or a ``Deny``.
            Exception: whatever a guard raised.
        """
        scoped = self._scoped.get(execution.agent_id or "", ())
        for guard in (*self._global, *scoped):
            verdict = guard(execution)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if isinstance(verdict, Deny):
                return verdict  # noqa: ASYNC910 - a sync guard is no schedule point: prepare's caller has one
            if verdict is not None:
                raise HookError(
                    f"a tool guard returned {type(verdict).__name__}: a guard returns "
                    "None or a Deny"
                )
        return None  # noqa: ASYNC910 - a sync guard is no schedule point: prepare's caller has one
