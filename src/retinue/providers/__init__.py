"""The model seam: request and chunk types, the ``Model`` protocol and the router.

The content blocks only some providers produce are here too: ``RedactedReasoning``
(Anthropic's redacted thinking) and ``OpaqueBlock`` (a block retinue does not
model, kept and replayed whole); the common blocks are at the top level, and
``ContentBlock`` is the union of them all.

The adapters live in ``retinue.providers.openai`` and ``retinue.providers.anthropic``,
the only modules that import the SDKs; ``import retinue`` imports neither.
"""

from __future__ import annotations

from retinue._content import ContentBlock, OpaqueBlock, RedactedReasoning
from retinue._errors import DuplicateAdapterError, NoAdapterError
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest, ToolSchema
from retinue._stream import (
    Aborted,
    BlockEnd,
    BlockStart,
    Errored,
    Finish,
    FinishReason,
    MaxTokens,
    OtherFinish,
    ReasoningDelta,
    Stop,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    ToolCalls,
    Usage,
    UsageChunk,
)

from ._admission import (
    AdmissionController,
    AdmissionLimits,
    AdmissionStatistics,
    AdmissionTicket,
    LaneStatistics,
)
from ._failures import (
    AuthenticationError,
    ModelNotFoundError,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    ProviderStreamError,
    RateLimitError,
)
from ._manage import ManagedModel, ManagedStatistics, estimate_tokens, manage
from ._model import Model, ModelRouter, RouteKey
from ._retry import RetryNotice, RetryPolicy

__all__ = [
    "Aborted",
    "AdmissionController",
    "AdmissionLimits",
    "AdmissionStatistics",
    "AdmissionTicket",
    "AuthenticationError",
    "BlockEnd",
    "BlockStart",
    "ContentBlock",
    "DuplicateAdapterError",
    "Errored",
    "Finish",
    "FinishReason",
    "LaneStatistics",
    "LlmCallConfig",
    "ManagedModel",
    "ManagedStatistics",
    "MaxTokens",
    "MessageHistory",
    "Model",
    "ModelNotFoundError",
    "ModelRequest",
    "ModelRouter",
    "NoAdapterError",
    "OpaqueBlock",
    "OtherFinish",
    "OverloadedError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderStatusError",
    "ProviderStreamError",
    "RateLimitError",
    "ReasoningDelta",
    "RedactedReasoning",
    "RetryNotice",
    "RetryPolicy",
    "RouteKey",
    "Stop",
    "StreamChunk",
    "TextDelta",
    "ToolCallDelta",
    "ToolCalls",
    "ToolSchema",
    "Usage",
    "UsageChunk",
    "estimate_tokens",
    "manage",
]
