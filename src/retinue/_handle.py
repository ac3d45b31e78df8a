"""What the lower layers know of an agent: its status, a turn's result, and its handle's verbs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypeAlias, final

import attrs

from ._content import ContentBlock
from ._errors import AgentError
from ._fresh_errors import copied_error
from ._sources import MessageSource
from ._stream import Usage
from .session import Session, TurnEndReason

__all__ = ["AgentHandle", "AgentStatus", "Content", "TurnResult"]

AgentStatus: TypeAlias = Literal["idle", "running", "disposed"]
"""What an agent is doing: ``idle`` (no turn running: a prompt just sent reads ``idle``
until its driver wakes and takes it, R2.11), ``running`` (a turn, or queued prompts about
to start one) or ``disposed`` (for good)."""
Content: TypeAlias = str | ContentBlock | Sequence[ContentBlock]


@final
@attrs.frozen
class TurnResult:
    """How a turn ended, with the last assistant text and the turn's summed usage.

    For a prompt an ``agent/prompt-submit`` listener blocked, the prompt's own end:
    ``rejected`` with its reason and no text, though the turn ran on with the rest
    of its batch (R7.11).
    """

    turn: int
    """The turn's number; 0 when no turn was logged for the prompt (discarded, or refused
    before its ``turn/start``)."""
    reason: TurnEndReason
    text: str = ""
    usage: Usage | None = None
    error: BaseException | None = attrs.field(default=None, eq=False)
    """The exception behind an ``error`` end, whose message and code the log keeps
    (R4.12): a provider's ``retry_after``, say, is read here. ``None`` for any
    other end, and for a turn whose answer came from the log, not its run."""

    def raise_for_error(self) -> TurnResult:
        """Raise the failure of an ``error`` end; return this result for any other end.

        As ``httpx.Response.raise_for_status``: ``text = (await agent.ask(q)).raise_for_error().text``.
        When :attr:`error` is an ``Exception`` (a ``ModelError``, a provider's error with
        its ``retry_after``, ...) it raises a fresh copy of it, of its type and with its
        fields, chained to it (``__cause__``, which holds the turn's traceback): each
        call, in any task (two asks a turn served share one result), has a traceback of
        its own; one that cannot be copied (its type refuses its args, a frozen attrs
        class) is raised itself. Else (an answer read from the log, a turn a
        ``BaseException`` of a tool or listener ended) it raises an
        :class:`~retinue.AgentError` with the logged message and code, chained to it.
        An ``aborted``, ``disposed``, ``rejected`` or ``max-tokens`` end raises nothing:
        :attr:`reason` tells them apart.
        """
        reason = self.reason
        if reason.kind != "error":
            return self
        error = self.error
        if isinstance(error, Exception):
            copy = copied_error(error)
            if copy is None:
                raise error
            raise copy from error
        raise AgentError(reason.message or "the turn failed", code=reason.code) from error


class AgentHandle(Protocol):
    """The verbs of an agent as a tool body or a listener sees it (``ctx.agent``).

    :class:`retinue.Agent` is one; so is the stand-in a sync tool body gets,
    whose async verbs raise ``TypeError`` (see :class:`retinue.tools.ToolContext`).
    """

    @property
    def id(self) -> str:
        """The agent's id, which is its session's."""
        ...

    @property
    def status(self) -> AgentStatus:
        """What the agent is doing now."""
        ...

    @property
    def session(self) -> Session:
        """The agent's session: its event log."""
        ...

    def send(self, content: Content, source: MessageSource | str | None = None) -> None:
        """Queue a prompt for the next turn; never blocks (see :meth:`retinue.Agent.send`)."""
        ...

    def steer(self, content: Content, source: MessageSource | str | None = None) -> None:
        """Steer the running turn between steps, or queue like ``send``; never blocks."""
        ...

    def inject(self, content: Content, source: MessageSource | str | None = None) -> None:
        """Record context without running the model; never blocks."""
        ...

    def cancel(self, reason: str | None = None) -> None:
        """Abort the running turn and discard what is queued; never blocks."""
        ...

    async def wait_idle(self) -> None:
        """Wait until no turn is running or queued and the last one was flushed."""
        ...

    async def ask(self, content: Content, source: MessageSource | str | None = None) -> TurnResult:
        """Send a prompt and wait for the turn that took it (see :meth:`retinue.Agent.ask`)."""
        ...

    async def dispose(self) -> None:
        """Stop the agent for good and wait for its teardown."""
        ...
