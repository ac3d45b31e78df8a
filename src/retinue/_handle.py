"""What the lower layers know of an agent: its status, a turn's result, and its handle's verbs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypeAlias, final

import attrs

from ._content import ContentBlock, MessageSource
from ._stream import Usage
from .session import Session, TurnEndReason

__all__ = ["AgentHandle", "AgentStatus", "Content", "TurnResult"]

AgentStatus: TypeAlias = Literal["idle", "running", "disposed"]
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


class AgentHandle(Protocol):
    """The verbs of an agent as a tool body or a listener sees it (``ctx.agent``).

    :class:`retinue.Agent` is one; so is the stand-in a sync tool body gets,
    whose async verbs raise ``TypeError`` (see :class:`retinue.tools.ToolContext`).
    """

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> AgentStatus: ...
    @property
    def session(self) -> Session: ...
    def send(self, content: Content, source: MessageSource | str | None = None) -> None: ...
    def steer(self, content: Content, source: MessageSource | str | None = None) -> None: ...
    def inject(self, content: Content, source: MessageSource | str | None = None) -> None: ...
    def cancel(self, reason: str | None = None) -> None: ...
    async def wait_idle(self) -> None: ...
    async def ask(
        self, content: Content, source: MessageSource | str | None = None
    ) -> TurnResult: ...
    async def dispose(self) -> None: ...
