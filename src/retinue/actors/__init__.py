"""Agents: the public handle, its options and status."""

from __future__ import annotations

from retinue._errors import AgentDisposedError, AgentError, AgentNotReadyError, StepLimitError
from retinue._options import AgentOptions
from retinue.loop import AgentStatus, TurnResult

from ._agent import Agent, Subscription, SubscriptionOverflowError

__all__ = [
    "Agent",
    "AgentDisposedError",
    "AgentError",
    "AgentNotReadyError",
    "AgentOptions",
    "AgentStatus",
    "StepLimitError",
    "Subscription",
    "SubscriptionOverflowError",
    "TurnResult",
]
