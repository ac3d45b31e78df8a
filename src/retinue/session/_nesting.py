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

from retinue._content import (
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue._lossless import JSON_LEVELS, MAX_JSON_DEPTH, Levels, deeper_than, too_deep

__all__ = [
    "check_blocks",
    "deeper_than_json",
    "too_deep",
]  # too_deep: re-exported for the converter


def _no_levels(_block: object) -> tuple[()]:
    return ()


# A block is stored as one JSON object: one level, holding what its fields hold.
_BLOCK_LEVELS: Levels = {
    **JSON_LEVELS,
    ToolResultBlock: lambda block: (block.content,),
    # Stored as its data with a "type" key added: the data's own levels.
    OpaqueBlock: lambda block: block.data.values(),
    # Fields all strings (or absent).
    Text: _no_levels,
    Reasoning: _no_levels,
    RedactedReasoning: _no_levels,
    ToolCall: _no_levels,
}


def deeper_than_json(value: object) -> bool:
    """Whether *value* (a block, or its stored JSON) nests more than MAX_JSON_DEPTH levels.

    An object or array is one level, as ``freeze_json`` counts them.
    """
    return deeper_than(value, MAX_JSON_DEPTH, _BLOCK_LEVELS)


def check_blocks(blocks: tuple[object, ...], where: str) -> None:
    """Refuse, naming ``where[index]``, a block of *blocks* nested too deeply to store.

    Only a tool result holds other blocks; an opaque block's data is bounded
    by ``freeze_json`` already, so no other block needs measuring. The events
    built every step call this only once their own loop has met a tool result.
    """
    for index, block in enumerate(blocks):
        if type(block) is ToolResultBlock and deeper_than_json(block):
            raise too_deep(f"{where}[{index}]")
