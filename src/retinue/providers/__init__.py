"""The model seam: request and chunk types, the ``Model`` protocol and the router.

The adapters live in ``retinue.providers.openai`` and ``retinue.providers.anthropic``,
the only modules that import the SDKs; ``import retinue`` imports neither.
"""

from __future__ import annotations

from .._request import LlmCallConfig, MessageHistory, ModelRequest, ToolSchema
from .._stream import (
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
from ._model import Model, ModelRouter

__all__ = [
    "Aborted",
    "BlockEnd",
    "BlockStart",
    "Errored",
    "Finish",
    "FinishReason",
    "LlmCallConfig",
    "MaxTokens",
    "MessageHistory",
    "Model",
    "ModelRequest",
    "ModelRouter",
    "OtherFinish",
    "ReasoningDelta",
    "Stop",
    "StreamChunk",
    "TextDelta",
    "ToolCallDelta",
    "ToolCalls",
    "ToolSchema",
    "Usage",
    "UsageChunk",
]
