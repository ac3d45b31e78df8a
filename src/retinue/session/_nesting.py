"""How deeply content blocks may nest: as deeply as any other JSON value (R4.5, R1.6).

A tool result holds blocks, so blocks can be built nested to any depth. Encoding
and decoding a block take about five Python frames per tool result (cattrs'
hooks), so a block deep enough would be logged and then fail to store or load
with a bare ``RecursionError``. A block's stored JSON may therefore nest at most
``MAX_JSON_DEPTH`` levels, the bound ``freeze_json`` sets on every other JSON
value: an event refuses such a block when it is built, and the decoder refuses
it when a stored event is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from retinue._content import (
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue._lossless import MAX_JSON_DEPTH, FrozenDict, too_deep

__all__ = [
    "check_blocks",
    "deeper_than_json",
    "too_deep",
]  # too_deep: re-exported for the converter

# Blocks stored as one JSON object whose fields are all strings (or absent).
_FLAT_BLOCKS = frozenset({Text, Reasoning, RedactedReasoning, ToolCall})


def deeper_than_json(value: object) -> bool:
    """Whether *value* (a block, or its stored JSON) nests more than MAX_JSON_DEPTH levels.

    A loop, not a recursion: it measures a value of any depth from any depth of
    the stack. An object or array is one level, as ``freeze_json`` counts them.
    """
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        children: Iterable[Any]
        kind = type(item)
        if kind is dict or kind is FrozenDict:
            children = item.values()  # type: ignore[attr-defined]
        elif kind is list or kind is tuple:
            children = item  # type: ignore[assignment]
        elif kind is ToolResultBlock:
            children = (item.content,)  # type: ignore[attr-defined]
        elif kind is OpaqueBlock:
            # Stored as its data with a "type" key added: the data's own levels.
            children = item.data.values()  # type: ignore[attr-defined]
        elif kind in _FLAT_BLOCKS:
            children = ()
        else:
            continue  # a scalar adds no level
        if level > MAX_JSON_DEPTH:
            return True
        pending.extend([(child, level + 1) for child in children])
    return False


def check_blocks(blocks: tuple[object, ...], where: str) -> None:
    """Refuse, naming ``where[index]``, a block of *blocks* nested too deeply to store.

    Only a tool result holds other blocks; an opaque block's data is bounded
    by ``freeze_json`` already, so no other block needs measuring. The events
    built every step call this only once their own loop has met a tool result.
    """
    for index, block in enumerate(blocks):
        if type(block) is ToolResultBlock and deeper_than_json(block):
            raise too_deep(f"{where}[{index}]")
