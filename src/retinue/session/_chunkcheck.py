"""What a stream chunk must hold for its stored line to load again (the decoder's rules, checked early)."""

from __future__ import annotations

import sys
from typing import Any

from retinue._content import (
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue._lossless import shown, too_deep, writable_int
from retinue._stream import (
    Aborted,
    BlockEnd,
    BlockStart,
    Errored,
    Finish,
    MaxTokens,
    OtherFinish,
    ReasoningDelta,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCalls,
    Usage,
    UsageChunk,
)

from ._nesting import deeper_than_json

__all__ = ["BLOCK_TYPES", "CHUNK_TYPES", "chunk_event_problem", "chunk_problem"]

BLOCK_TYPES: dict[str, type[Any]] = {
    cls.type: cls for cls in (Text, Reasoning, RedactedReasoning, ToolCall, ToolResultBlock)
}
"""The stored content block kinds, by their ``type`` tag."""
CHUNK_TYPES: dict[str, type[Any]] = {
    cls.type: cls
    for cls in (BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd, UsageChunk, Finish)
}
"""The stored stream chunk kinds, by their ``type`` tag."""

# What each field of a chunk (and of the finish reason it holds) must be for its
# stored line to load again: ``int`` is an exact int (a bool or float is refused on
# load, and one too long for JSON to write), ``str`` any str, ``str?`` a str or None, a tuple of classes one of those
# classes. A content block checks its own fields when it is built.
_INT, _STR, _OPT_STR = "int", "str", "str?"
_FIELD_KINDS: dict[type[Any], tuple[tuple[str, Any], ...]] = {
    BlockStart: (("index", _INT), ("block_type", _STR)),
    TextDelta: (("index", _INT), ("text", _STR)),
    ReasoningDelta: (("index", _INT), ("text", _STR), ("signature", _OPT_STR)),
    ToolCallDelta: (
        ("index", _INT),
        ("id", _OPT_STR),
        ("arguments_delta", _STR),
        ("name", _OPT_STR),
    ),
    BlockEnd: (("index", _INT), ("block", (*BLOCK_TYPES.values(), OpaqueBlock))),
    UsageChunk: (("usage", (Usage,)),),
    Finish: (("reason", (Stop, ToolCalls, MaxTokens, Aborted, Errored, OtherFinish)),),
    Errored: (("message", _STR), ("code", _OPT_STR)),
    OtherFinish: (("name", _STR),),
}


_CHUNK_CLASSES = frozenset(CHUNK_TYPES.values())


def chunk_problem(chunk: object) -> str | None:
    """What keeps *chunk* from being stored and loaded back, naming the field; ``None`` if nothing.

    The same rules :func:`decode_event` applies to a stored chunk, checked on the
    value before it is logged or written.
    """
    fields = _FIELD_KINDS.get(type(chunk))
    if fields is None or type(chunk) not in _CHUNK_CLASSES:
        return f"{type(chunk).__name__} is not a stream chunk"
    return _value_problem(chunk, fields, getattr(chunk, "type", ""))


def _value_problem(value: object, fields: tuple[tuple[str, Any], ...], where: str) -> str | None:
    for name, kind in fields:
        item = getattr(value, name)
        problem = _field_problem(item, kind)
        if problem is not None:
            return f"{where}.{name} {problem}, got {shown(item)}"
        if type(item) is ToolResultBlock and deeper_than_json(item):
            # Named without its value: the repr of so deep a block would overflow the stack.
            return str(too_deep(f"{where}.{name}"))
        nested = _FIELD_KINDS.get(type(item))
        if nested is not None:
            problem = _value_problem(item, nested, f"{where}.{name}")
            if problem is not None:
                return problem
    return None


def _field_problem(item: object, kind: Any) -> str | None:
    if kind is _INT:
        if type(item) is not int:
            return "must be an integer (not a bool or float)"
        return None if writable_int(item) else "must be an integer JSON can write"
    if kind is _STR:
        return None if isinstance(item, str) else "must be a string"
    if kind is _OPT_STR:
        return None if item is None or isinstance(item, str) else "must be a string or None"
    return None if type(item) in kind else f"must be a {' or '.join(k.__name__ for k in kind)}"


def chunk_event_problem(turn: object, step: object, chunk: object) -> str | None:
    """Why an ``assistant/chunk`` event would be stored as a line no load reads (R4.5), or None.

    The decoder's rules: exact ints JSON can write for the turn and the step,
    and a chunk :func:`chunk_problem` accepts.
    """
    if type(turn) is not int or type(step) is not int:
        return f"turn and step must be integers, got {shown(turn)}, {shown(step)}"
    for name, value in (("turn", turn), ("step", step)):
        if not writable_int(value):
            return f"{name} is an integer of more than {sys.get_int_max_str_digits()} digits"
    return chunk_problem(chunk)
