"""The canonical JSON line of the common events, built by hand (R11.13).

Equal, byte for byte, to compact ``json`` of the codec's dump of the event,
which a property test checks; an event this does not cover gets ``None``
and the codec's general path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from retinue._content import ContentBlock, Text, ToolCall
from retinue._sources import MessageSource
from retinue._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    BlockEnd,
    BlockStart,
    Finish,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)

from ._events import (
    AssistantChunk,
    AssistantMessage,
    ContextMessage,
    Event,
    Replace,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessage,
)

__all__ = ["fast_line"]

_esc = json.encoder.encode_basestring
_FINISH_LINES: dict[type, str] = {
    type(reason): '{"kind":' + _esc(reason.kind) + "}"
    for reason in (STOP, TOOL_CALLS, MAX_TOKENS, ABORTED)
}


def fast_line(event: Event) -> str | None:
    """The canonical line built by hand for common events, else ``None``."""
    encode = _DATA_ENCODERS.get(type(event.data))
    if encode is None:
        return None
    try:
        data = encode(event.data)
    except (TypeError, ValueError):
        # A field that is not a string (_esc takes only str), or an int too
        # long to write: the general encoder takes it, and refuses it typed.
        return None
    if data is None:
        return None
    parts = [f'{{"seq":{event.seq},"type":"{event.type}","time":{event.time},"data":{data}']
    if event.source_event_seqs is not None:
        parts.append(',"source_event_seqs":[' + ",".join(map(str, event.source_event_seqs)) + "]")
    surface = event.surface_op
    if surface == "append":
        parts.append(',"surface_op":"append"')
    elif isinstance(surface, Replace):
        parts.append(
            f',"surface_op":{{"op":"replace","start":{surface.start},"end":{surface.end}}}'
        )
    parts.append("}")
    return "".join(parts)


def _opt(name: str, value: str | None) -> str:
    return "" if value is None else f',"{name}":{_esc(value)}'


def _source(source: MessageSource) -> str:
    return f'{{"kind":{_esc(source.kind)}{_opt("plugin", source.plugin)}}}'


def _block(block: ContentBlock) -> str | None:
    if type(block) is Text:
        return '{"type":"text","text":' + _esc(block.text) + "}"
    if type(block) is ToolCall:
        return (
            f'{{"type":"tool-call","id":{_esc(block.id)},"name":{_esc(block.name)},'
            f'"arguments":{_esc(block.arguments)}}}'
        )
    return None


def _content(blocks: tuple[ContentBlock, ...]) -> str | None:
    parts = [_block(block) for block in blocks]
    if None in parts:
        return None
    return "[" + ",".join(parts) + "]"  # type: ignore[arg-type]


def _usage(usage: Usage) -> str:
    out = f'{{"input_tokens":{usage.input_tokens},"output_tokens":{usage.output_tokens}'
    for name in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        value = getattr(usage, name)
        if value is not None:
            out += f',"{name}":{value}'
    return out + "}"


def _chunk(chunk: StreamChunk) -> str | None:
    # Only an exact int is written here (a bool would be written ``True``, a float
    # ``0.0``, neither loadable): anything else takes the general path, which refuses it.
    if type(getattr(chunk, "index", 0)) is not int:
        return None
    if isinstance(chunk, TextDelta):
        return f'{{"type":"text-delta","index":{chunk.index},"text":{_esc(chunk.text)}}}'
    if isinstance(chunk, ToolCallDelta):
        return (
            f'{{"type":"tool-call-delta","index":{chunk.index}{_opt("id", chunk.id)},'
            f'"arguments_delta":{_esc(chunk.arguments_delta)}{_opt("name", chunk.name)}}}'
        )
    if isinstance(chunk, BlockStart):
        return (
            f'{{"type":"block-start","index":{chunk.index},"block_type":{_esc(chunk.block_type)}}}'
        )
    if isinstance(chunk, BlockEnd):
        block = _block(chunk.block)
        return (
            None
            if block is None
            else f'{{"type":"block-end","index":{chunk.index},"block":{block}}}'
        )
    if isinstance(chunk, UsageChunk):
        if type(chunk.usage) is not Usage:
            return None
        return f'{{"type":"usage","usage":{_usage(chunk.usage)}}}'
    if isinstance(chunk, Finish):
        reason = _FINISH_LINES.get(type(chunk.reason))
        return None if reason is None else f'{{"type":"finish","reason":{reason}}}'
    return None


def _assistant_chunk(data: AssistantChunk) -> str | None:
    turn, step, chunk = data
    if type(turn) is not int or type(step) is not int:
        return None
    line = _chunk(chunk)
    return None if line is None else f'{{"turn":{turn},"step":{step},"chunk":{line}}}'


def _turn_start(data: TurnStart) -> str:
    trigger = data.trigger
    return (
        f'{{"turn":{data.turn},"trigger":{{"kind":{_esc(trigger.kind)},'
        f'"source":{_source(trigger.source)}}}}}'
    )


def _turn_end(data: TurnEnd) -> str:
    reason = data.reason
    out = (
        f'{{"turn":{data.turn},"reason":{{"kind":{_esc(reason.kind)}{_opt("reason", reason.reason)}'
    )
    if reason.step is not None:
        out += f',"step":{reason.step}'
    return out + f"{_opt('message', reason.message)}{_opt('code', reason.code)}}}}}"


def _step(data: StepStart | StepEnd) -> str:
    # Their constructors take exact ints only: a bool or float would be written ``True``.
    return f'{{"turn":{data.turn},"step":{data.step}}}'


def _user(data: UserMessage | ContextMessage) -> str | None:
    content = _content(data.content)
    return None if content is None else f'{{"content":{content},"source":{_source(data.source)}}}'


def _assistant(data: AssistantMessage) -> str | None:
    content = _content(data.content)
    if content is None:
        return None
    usage = "" if data.usage is None else f',"usage":{_usage(data.usage)}'
    return f'{{"turn":{data.turn},"step":{data.step},"content":{content}{usage}}}'


def _tool_call(data: ToolCallEvent) -> str:
    return (
        f'{{"turn":{data.turn},"step":{data.step},"call_id":{_esc(data.call_id)},'
        f'"name":{_esc(data.name)},"arguments":{_esc(data.arguments)}}}'
    )


def _tool_result(data: ToolResultEvent) -> str | None:
    content = _content(data.content)
    if content is None or data.meta is not None:
        return None
    error = data.error
    tail = (
        "" if error is None else f',"error":{{"name":{_esc(error.name)},"code":{_esc(error.code)}}}'
    )
    return (
        f'{{"turn":{data.turn},"step":{data.step},"call_id":{_esc(data.call_id)},'
        f'"content":{content},"is_error":{"true" if data.is_error else "false"}{tail}}}'
    )


_DATA_ENCODERS: dict[type[Any], Callable[[Any], str | None]] = {
    AssistantChunk: _assistant_chunk,
    TurnStart: _turn_start,
    TurnEnd: _turn_end,
    StepStart: _step,
    StepEnd: _step,
    UserMessage: _user,
    ContextMessage: _user,
    AssistantMessage: _assistant,
    ToolCallEvent: _tool_call,
    ToolResultEvent: _tool_result,
}
