"""The up-front estimate of a request's input tokens, which admission charges to its lane."""

from __future__ import annotations

import json
import weakref

from retinue._content import OpaqueBlock, Reasoning, Text, ToolCall, ToolResultBlock
from retinue._request import ModelRequest, ToolSchema

__all__ = ["IMAGE_TOKENS", "estimate_tokens"]

IMAGE_TOKENS = 1_600
"""The estimate of an image, or of any block retinue does not know (most often one).

About what Anthropic charges for the largest image it takes unscaled; OpenAI
charges less. Its base64 data, counted as text, would be many times what it costs.
"""

# Keyed by identity, not by the schema: a ToolSchema's hash walks its whole schema,
# which would cost each request about what encoding it does.
_SCHEMA_CHARS: dict[int, tuple[weakref.ref[ToolSchema], int]] = {}


def estimate_tokens(request: ModelRequest) -> int:
    """Estimate a request's input tokens: about four characters per token; pure.

    Tool schemas count as encoded, images (and other blocks retinue does not
    know) as :data:`IMAGE_TOKENS` each.
    """
    chars = len(request.system or "")
    blocks = 0
    for message in request.messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                for part in block.content:
                    chars += _block_chars(part)
                    blocks += isinstance(part, OpaqueBlock)
            else:
                chars += _block_chars(block)
                blocks += isinstance(block, OpaqueBlock)
    for tool in request.tools:
        chars += _tool_chars(tool)
    return chars // 4 + 4 * len(request.messages) + IMAGE_TOKENS * blocks + 1


def _block_chars(block: object) -> int:
    if isinstance(block, Text | Reasoning):
        return len(block.text)
    if isinstance(block, ToolCall):
        return len(block.arguments) + len(block.name)
    return 0


def _tool_chars(tool: ToolSchema) -> int:
    """The characters *tool* sends, its schema encoded: worked out once per schema.

    A schema is frozen and goes out again with every request of its agent.
    """
    found = _SCHEMA_CHARS.get(id(tool))
    if found is not None and found[0]() is tool:
        return found[1]
    encoded = json.dumps(tool.parameters, ensure_ascii=False, separators=(",", ":"))
    chars = len(tool.name) + len(tool.description) + len(encoded)
    key = id(tool)

    def forget(ref: weakref.ref[ToolSchema]) -> None:
        # A newer schema may hold the id by now: only this one's entry goes.
        if _SCHEMA_CHARS.get(key, (None, 0))[0] is ref:
            del _SCHEMA_CHARS[key]

    _SCHEMA_CHARS[key] = (weakref.ref(tool, forget), chars)
    return chars
