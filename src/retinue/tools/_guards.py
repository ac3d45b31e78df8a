"""Guards: checks that may still deny a tool call every pre-execute listener allowed (R9.3).

A ``tools/pre-execute`` listener that allows without calling ``next`` ends the
chain: listeners after it never see the call. A guard is monotonic instead:
it can only deny, and it is asked whatever the listeners decided, so a
policy registered as a guard cannot be waived by another listener's
``Allow``.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

import attrs

from retinue._callables import check_callable
from retinue._errors import HookError
from retinue._naming import qualified_name
from retinue.hooks import Deny
from retinue.hooks._calls import raise_failure
from retinue.hooks._listeners import Entry, Seam

from ._execution import PreparedCall, ToolExecution, error_result, exception_result

__all__ = ["Guard", "Guards"]

log = logging.getLogger("retinue.tools")

Guard: TypeAlias = Callable[[ToolExecution], "Deny | Awaitable[Deny | None] | None"]
"""A guard: ``None`` lets the call through, a :class:`~retinue.hooks.Deny` refuses it."""


@final
@attrs.define(eq=False)
class Guards:
    """The guards of one registry, global or scoped to one agent, in registration order.

    Kept as the hook bus keeps a seam's listeners: the global guards in one
    list and each agent's in its own, merged by registration order at call
    time. A call, a registration, its removal and an agent's teardown touch
    only the global guards and that agent's, however many agents have guards.
    """

    _entries: Seam = attrs.field(factory=Seam, init=False)
    _orders: itertools.count[int] = attrs.field(factory=itertools.count, init=False)

    def add(self, guard: Guard, scope: str | None) -> Callable[[], None]:
        """Register *guard* globally (*scope* ``None``) or for one agent; returns its remover.

        Each registration is its own entry, removed by identity: registering a
        guard twice keeps two.
        """
        # As a listener is checked: a generator function's calls would all fail, unsaid
        # until a call is made.
        check_callable(guard, "tool guards", synchronous=False)
        entry = Entry(guard, scope, next(self._orders))
        entries = self._entries
        entries.add(entry)

        def remove() -> None:
            entries.remove(entry)

        return remove

    def drop_scope(self, scope: str) -> None:
        """Forget every guard scoped to *scope* (its agent's teardown)."""
        self._entries.scoped.pop(scope, None)

    def watch(self, agent_id: str | None) -> bool:
        """Whether any guard applies to a call of *agent_id*."""
        entries = self._entries
        # Asked for every call, and most registries have no guard at all.
        if not entries.shared and not entries.scoped:
            return False
        return entries.heard_by(agent_id)

    async def prepared(self, execution: ToolExecution) -> PreparedCall:
        """Ask the guards about a call the listeners allowed: a go, a denial or a failure.

        A denial still goes through post-execute; a guard that raises, or
        returns anything but ``None`` or a ``Deny``, fails the call for good.
        No schedule point of its own (a sync guard has none): the registry's
        caller has one.
        """
        try:
            denial = await self._denial(execution)
        except Exception as exc:
            log.exception("a tool guard failed for %r", execution.name)
            failure = exc
        else:
            if denial is None:
                return PreparedCall(execution)  # noqa: ASYNC910 - the caller's schedule point
            return PreparedCall(execution, error_result(execution.call_id, denial.reason))
        result = exception_result(execution.call_id, failure)
        return PreparedCall(execution, result, needs_post_execute=False)  # noqa: ASYNC910 - the caller's schedule point

    async def _denial(self, execution: ToolExecution) -> Deny | None:
        """The first applicable guard's denial of *execution*, or ``None``.

        Raises:
            Exception: a guard's own, or its ``StopIteration`` or ``BaseException`` that
                does not pass on as one naming it (:func:`culprit_failure`).
            BaseException: Ctrl-C or a real cancel, as they are.
        """
        # A new list: a guard may (un)register guards while it is asked.
        for guard in self._entries.reached(execution.agent_id):
            # Asked inline, not through a helper's coroutine: one more per guard and call.
            try:
                verdict = guard(execution)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except BaseException as exc:
                raise_failure(_guard_label(guard), exc)
            if isinstance(verdict, Deny):
                return verdict  # noqa: ASYNC910 - the caller's schedule point
            if verdict is not None:
                raise HookError(
                    f"{_guard_label(guard)} returned {type(verdict).__name__}: a guard "
                    "returns None or a Deny"
                )
        return None  # noqa: ASYNC910 - the caller's schedule point


def _guard_label(guard: Callable[..., object]) -> str:
    """A guard as errors name it: "a tool guard (app.policy)", its code alone."""
    return f"a tool guard ({qualified_name(guard)})"
