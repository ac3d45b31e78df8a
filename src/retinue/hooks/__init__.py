"""The event bus and the typed decisions its seams return."""

from __future__ import annotations

from retinue._errors import HookError, HookTimeoutError
from retinue._sources import HookContext

from ._bus import HookBus
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
from ._listeners import agent_scope
from ._seams import SEAMS, Listener, SeamName

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
    "HookContext",
    "HookError",
    "HookTimeoutError",
    "Listener",
    "PostToolDecision",
    "PreToolDecision",
    "PromptDecision",
    "SeamName",
    "Stop",
    "agent_scope",
]
