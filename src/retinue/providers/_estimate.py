"""The up-front estimate of a request's input tokens, which admission charges to its lane."""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Sequence

from retinue._content import Message, OpaqueBlock, Reasoning, Text, ToolCall, ToolResultBlock
from retinue._request import ModelRequest, ToolSchema, derived_of, messages_since

__all__ = ["IMAGE_TOKENS", "estimate_tokens"]

IMAGE_TOKENS = 1_600
"""The estimate of an image, or of any block retinue does not know (most often one).

About what Anthropic charges for the largest image it takes unscaled; OpenAI
charges less. Its base64 data, counted as text, would be many times what it costs.
"""

# Keyed by identity, not by the schema: a ToolSchema's hash walks its whole schema,
# which would cost each request about what encoding it does.
_SCHEMA_CHARS: dict[int, tuple[weakref.ref[ToolSchema], int]] = {}


_COUNTED = object()
"""Where a session's history keeps how many of its messages were counted, and to what."""


def estimate_tokens(request: ModelRequest) -> int:
    """Estimate a request's input tokens: about four characters per token; pure.

    Tool schemas count as encoded, images (and other blocks retinue does not
    know) as :data:`IMAGE_TOKENS` each. A session's history is counted once:
    the next request's estimate counts only the messages logged since.
    """
    chars, opaque = _history_counts(request.messages)
    chars += len(request.system or "")
    for tool in request.tools:
        chars += _tool_chars(tool)
    return chars // 4 + 4 * len(request.messages) + IMAGE_TOKENS * opaque + 1


def _history_counts(messages: Sequence[Message]) -> tuple[int, int]:
    """The characters and the unknown blocks of *messages*.

    What the first messages of a session's (append-only) list count to is
    kept beside it, so each request counts only the messages added since the
    last; an older snapshot counted again leaves the later count kept.
    """
    found = derived_of(messages)
    if found is None:
        return _counts(messages)
    prefix, store = found
    chars, opaque = _counts(prefix)
    listed = len(messages) - len(prefix)
    kept = store.get(_COUNTED)
    counted, kept_chars, kept_opaque = (
        kept if isinstance(kept, tuple) and kept[0] <= listed else (0, 0, 0)
    )
    more_chars, more_opaque = _counts(messages_since(messages, len(prefix) + counted))
    total = (listed, kept_chars + more_chars, kept_opaque + more_opaque)
    if not isinstance(kept, tuple) or listed > kept[0]:
        store[_COUNTED] = total
    return chars + total[1], opaque + total[2]


def _counts(messages: Iterable[Message]) -> tuple[int, int]:
    """The characters of *messages*' text, calls and results, and how many blocks
    retinue does not know they hold."""
    chars = opaque = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                for part in block.content:
                    chars += _block_chars(part)
                    opaque += isinstance(part, OpaqueBlock)
            else:
                chars += _block_chars(block)
                opaque += isinstance(block, OpaqueBlock)
    return chars, opaque


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
