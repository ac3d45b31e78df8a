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


@final
class StepSignal:
    """What abort-aware listeners see of the step's cancellation (R7.41): read-only.

    ``cancel_called`` tells whether the step was aborted (cancel or dispose);
    ``reason`` says why. The loop aborts and retires it (:func:`abort_step`,
    :func:`retire_step`); a listener that would abort calls ``agent.cancel``.
    """

    __slots__ = ("_aborted", "_core", "_scope")

    def __init__(self, core: AgentCore, scope: trio.CancelScope) -> None:
        """Open a window: the signal is *core*'s (what its verbs abort) until retired."""
        self._core = core
        self._scope = scope
        # A plain attribute, which the loop reads per chunk: the scope is only ever
        # cancelled through abort_step(), and CancelScope.cancel_called is a property.
        self._aborted = False
        core.step_signal = self

    @property
    def cancel_called(self) -> bool:
        """Whether the step was aborted (by a cancel or the agent's disposal)."""
        return self._aborted

    @property
    def reason(self) -> str | None:
        """The abort reason, once aborted."""
        if not self._aborted:
            return None
        return abort_reason(self._core)


def abort_step(signal: StepSignal) -> None:
    """Cancel *signal*'s step scope; never blocks. Once its window has ended, does nothing.

    Not a method: listeners read the signal, and an abort of theirs (no cancel's
    reason) would end the turn as a disposal.
    """
    if signal._core.step_signal is not signal:
        return
    signal._aborted = True
    signal._scope.cancel()


def retire_step(signal: StepSignal) -> None:
    """End *signal*'s window and unregister it from the agent.

    The turn's scope outlives the window, so a late abort is ignored.
    """
    if signal._core.step_signal is signal:
        signal._core.step_signal = None
