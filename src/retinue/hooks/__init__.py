"""The event bus and the typed decisions its seams return."""

from __future__ import annotations

from retinue._errors import HookError

from ._bus import SEAMS, HookBus, Listener, SeamName, agent_scope
from ._decisions import (
    Accept,
    Allow,
    Ask,
    Block,
    ContinuationDecision,
    Continue,
    Deny,
    PostToolDecision,
    PreToolDecision,
    PromptDecision,
    Stop,
)

__all__ = [
    "SEAMS",
    "Accept",
    "Allow",
    "Ask",
    "Block",
    "ContinuationDecision",
    "Continue",
    "Deny",
    "HookBus",
    "HookError",
    "Listener",
    "PostToolDecision",
    "PreToolDecision",
    "PromptDecision",
    "SeamName",
    "Stop",
    "agent_scope",
]
