"""The step's abort signal (R7.41): what listeners read, and how the loop aborts it."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

if TYPE_CHECKING:
    from ._core import AgentCore

__all__ = ["StepSignal", "abort_reason", "abort_step", "retire_step"]


def abort_reason(core: AgentCore) -> str | None:
    """Why *core*'s running step was aborted: ``"disposed"`` or the cancel reason."""
    return "disposed" if core.disposed else core.cancel_reason


_set = object.__setattr__


@final
class StepSignal:
    """What abort-aware listeners see of the step's cancellation (R7.41): read-only.

    ``cancel_called`` tells whether the step was aborted (cancel or dispose);
    ``reason`` says why. The loop aborts and retires it (:func:`abort_step`,
    :func:`retire_step`); a listener that would abort calls ``agent.cancel``.
    """

    __slots__ = ("_core", "_scope", "cancel_called")

    # Written through object.__setattr__, which the loop alone calls: a slot read stays
    # a plain read where the loop checks it per chunk, and a listener's write is refused.
    _core: AgentCore
    _scope: trio.CancelScope
    cancel_called: bool
    """Whether the step was aborted (by a cancel or the agent's disposal)."""

    def __init__(self, core: AgentCore, scope: trio.CancelScope) -> None:
        """Open a window: the signal is *core*'s (what its verbs abort) until retired."""
        _set(self, "_core", core)
        _set(self, "_scope", scope)
        # Not CancelScope.cancel_called, a property: the scope is only ever
        # cancelled through abort_step(), which sets this.
        _set(self, "cancel_called", False)  # noqa: FBT003 - the value object.__setattr__ sets
        core.step_signal = self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"a step signal is read-only ({name} cannot be set): agent.cancel aborts the step"
        )

    @property
    def reason(self) -> str | None:
        """The abort reason, once aborted."""
        if not self.cancel_called:
            return None
        return abort_reason(self._core)


def abort_step(signal: StepSignal) -> None:
    """Cancel *signal*'s step scope; never blocks. Once its window has ended, does nothing.

    Not a method: listeners read the signal, and an abort of theirs (no cancel's
    reason) would end the turn as a disposal.
    """
    if signal._core.step_signal is not signal:
        return
    _set(signal, "cancel_called", True)  # noqa: FBT003 - the value object.__setattr__ sets
    signal._scope.cancel()


def retire_step(signal: StepSignal) -> None:
    """End *signal*'s window and unregister it from the agent.

    The turn's scope outlives the window, so a late abort is ignored.
    """
    if signal._core.step_signal is signal:
        signal._core.step_signal = None
