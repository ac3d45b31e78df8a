"""Block bookkeeping shared by the stream decoders: indices, partial text, closing blocks."""

from __future__ import annotations

import json
from collections.abc import Container, Hashable
from typing import final

import attrs

from retinue._content import ContentBlock, Reasoning, Text, ToolCall, new_tool_call_id
from retinue._lossless import joined_surrogates
from retinue._stream import BlockEnd, ReasoningDelta, TextDelta, ToolCallDelta, Usage

from ._failures import ProviderStreamError, stream_error

__all__ = [
    "BlockTable",
    "arguments_text",
    "block_index",
    "delta_text",
    "error_event",
    "loads_event",
    "malformed",
    "no_arguments",
    "wrong_type",
]

_TEXT, _REASONING, _TOOL = "text", "reasoning", "tool-call"

JsonObject = dict[str, object]


# Whether text is whole JSON, whatever its numbers: none is converted, so no
# number (NaN, 1e400, a very long integer) makes whole text look cut.
_decode_any_number = json.JSONDecoder(parse_int=str, parse_float=str, parse_constant=str).decode


def no_arguments(value: object) -> bool:
    """Whether a call's arguments are none yet: what the API (``""``) and some servers
    (``{}``, as text or an object) add a call with before its arguments stream."""
    return value is None or value == "" or value == "{}" or value == {}


def arguments_text(value: object, where: str, call: str | None) -> str:
    """A call's arguments as JSON text, from the response of the API *where* names.

    Text is kept as sent (R9.6: broken JSON is the tool's to report); an
    object, as some servers and Anthropic's ``input`` send it, becomes compact
    JSON text; ``None`` is no arguments yet. *call* (its id, or name) names
    the call in an error.

    Raises:
        ProviderStreamError: ``MALFORMED_RESPONSE``: the value is of another
            type, or an object holding ``NaN``, ``Infinity`` or a number
            beyond a float, which Python's parser read but JSON cannot write.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, dict):
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except ValueError:
            raise malformed(
                f"{where}: the arguments of tool call {call!r} hold NaN, Infinity or a "
                "number beyond a float's range, which JSON cannot carry"
            ) from None
    raise malformed(
        f"{where}: the arguments of tool call {call!r} are of type {type(value).__name__}, "
        "not JSON text or an object"
    )


def loads_event(data: bytes) -> dict[str, object]:
    """Parse one event's JSON object; malformed data raises :class:`ProviderStreamError`."""
    try:
        payload = json.loads(data)
    except ValueError:
        payload = None
    except RecursionError:
        raise malformed(f"JSON nested too deeply to parse: {data[:80]!r}") from None
    if not isinstance(payload, dict):
        raise malformed(f"data that is not a JSON object: {data[:80]!r}")
    return payload


def error_event(data: bytes, where: str) -> ProviderStreamError:
    """The failure an event named ``error`` reports, whatever its data holds.

    The SDKs raise on the event's name alone: a proxy's error event may carry
    no ``type`` of ``error``, hold its error object bare, or be plain text.
    """
    try:
        payload: object = json.loads(data)
    except (ValueError, RecursionError):
        text = data.decode("utf-8", "replace").strip()
        if text.startswith(("{", "[")):
            # JSON cut short (a body torn inside its last line) or garbled: malformed,
            # as any other event's, so a torn body is reported truncated and retried.
            return malformed(f"an error event whose data is no JSON: {data[:80]!r}")
        payload = text[:_ERROR_TEXT_SHOWN] or None  # a proxy's plain text
    if isinstance(payload, dict) and payload.get("error"):
        payload = payload["error"]
    return stream_error(payload, where=where)


_ERROR_TEXT_SHOWN = 500
"""How much of an error event's text (when it is no JSON) its failure quotes."""


def malformed(message: str) -> ProviderStreamError:
    """The error for a response that parsed but is not what the API sends."""
    return ProviderStreamError(message, code="MALFORMED_RESPONSE", retryable=True)


def wrong_type(what: str, value: object, wanted: str = "a string") -> ProviderStreamError:
    """The error for *what* (a field that says what an event is, or how the answer ended)
    given *value*, of a type other than *wanted*: read as absent, the event's content or
    the finish would be lost without a word."""
    return malformed(f"{what} is of type {type(value).__name__}, not {wanted}")


def delta_text(value: object, what: str) -> str:
    """The text of a delta, *what*, that is no string: none (``null``) is empty; any other
    value is refused as malformed: read as none, it would be dropped without a word.

    Called only off the per-delta path, once the text was found to be no string.
    """
    if value is None:
        return ""
    raise wrong_type(what, value)


def block_index(payload: JsonObject, field: str, where: str) -> int | None:
    """The block index *field* of an event: an integer, or ``None`` when absent.

    Raises:
        ProviderStreamError: the index is of another type (it keys the block table).
    """
    value = payload.get(field)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise malformed(
        f"{where}: an event's {field} is of type {type(value).__name__}, not an integer"
    )


@attrs.define(eq=False, slots=True)
class _Block:
    index: int
    kind: str
    parts: list[str] = attrs.field(factory=list)
    signature: list[str] | None = None
    call_id: str | None = None
    # The id the provider gave the call, when it is not the one kept (it repeats another's).
    given_id: str | None = None
    name: str | None = None
    final: ContentBlock | None = None
    ended: bool = False

    def build(self) -> ContentBlock:
        if self.final is not None:
            return self.final
        text = "".join(self.parts)
        if self.kind == _TEXT:
            return Text(text)
        if self.kind == _REASONING:
            signature = None if self.signature is None else "".join(self.signature)
            return Reasoning(text, signature)
        assert self.call_id is not None  # given, or minted by the first fragment (tool_call)
        return ToolCall(self.call_id, self.name or "", text or "{}")


@final
@attrs.define(eq=False)
class BlockTable:
    """Maps a decoder's block keys to message indices, in order of first appearance."""

    _blocks: dict[Hashable, _Block] = attrs.field(factory=dict, init=False)
    # The provider's tool-call ids seen so far, each kept by the first call that gave it.
    _call_ids: set[str] = attrs.field(factory=set, init=False)
    usage: Usage | None = None

    def _block(self, key: Hashable, kind: str) -> _Block:
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = _Block(len(self._blocks), kind)
        elif block.ended:
            # Its end has gone out with the content so far: what came after would be lost.
            raise malformed(f"content for block {key!r} came after the block ended")
        return block

    def text(self, key: Hashable, text: str) -> TextDelta:
        """Record text for the block at *key* and return its delta."""
        block = self._block(key, _TEXT)
        block.parts.append(text)
        return TextDelta(block.index, text)

    def more_text(self, key: Hashable, text: str) -> TextDelta | None:
        """Record more text for the open block at *key* and return its delta; ``None`` when
        there is no such block yet, or it has ended (see :meth:`text`)."""
        block = self._blocks.get(key)
        if block is None or block.ended:
            return None
        block.parts.append(text)
        return TextDelta(block.index, text)

    def reasoning(self, key: Hashable, text: str, signature: str | None = None) -> ReasoningDelta:
        """Record reasoning text (or a signature fragment) and return its delta."""
        block = self._block(key, _REASONING)
        if text:
            block.parts.append(text)
        if signature is not None:
            if block.signature is None:
                block.signature = []
            block.signature.append(signature)
        return ReasoningDelta(block.index, text, signature)

    def tool_call(
        self, key: Hashable, call_id: str | None, name: str | None, arguments: str
    ) -> ToolCallDelta:
        """Record a tool-call fragment and return its delta."""
        block = self._block(key, _TOOL)
        if call_id:
            if call_id != block.call_id and call_id != block.given_id:
                self._take_id(block, call_id)
            call_id = block.call_id
        elif block.call_id is None:
            # Some servers send no id: the call still needs one that no other call
            # of the history has, in the chunk that opens it as in the message.
            block.call_id = call_id = new_tool_call_id()
        if name:
            block.name = name
        if arguments:
            block.parts.append(arguments)
        return ToolCallDelta(block.index, call_id, arguments, name)

    def more_arguments(self, key: Hashable, arguments: str) -> ToolCallDelta | None:
        """Record more arguments for the open tool call at *key*, which its first fragment
        gave an id, and return their delta; ``None`` when there is no such call yet, or it
        has ended (see :meth:`tool_call`)."""
        block = self._blocks.get(key)
        if block is None or block.ended:
            return None
        if arguments:
            block.parts.append(arguments)
        return ToolCallDelta(block.index, None, arguments, None)

    def rekey(self, key: Hashable, new: Hashable) -> None:
        """Keep the block at *key* by *new* from now on, in its place among the blocks."""
        self._blocks = {
            (new if held == key else held): block for held, block in self._blocks.items()
        }

    def _take_id(self, block: _Block, call_id: str) -> None:
        """Give *block* the provider's *call_id*, or a fresh id if another call holds it.

        Some servers give parallel calls one id; results are matched to calls
        by id, so a repeat would fail the step. The call that gave it first
        keeps it.
        """
        if call_id in self._call_ids:
            block.call_id, block.given_id = new_tool_call_id(), call_id
        else:
            self._call_ids.add(call_id)
            block.call_id, block.given_id = call_id, None

    def holds_whole_call(self, key: Hashable) -> bool:
        """Whether the block at *key* is an open, named tool call whose arguments so far
        are a whole JSON object (parsed: ask only off the per-fragment path)."""
        block = self._blocks.get(key)
        if block is None or block.kind != _TOOL or not block.name or block.ended:
            return False
        try:
            value = _decode_any_number("".join(block.parts))
        except (ValueError, RecursionError):
            return False
        return isinstance(value, dict)

    def has(self, key: Hashable) -> bool:
        """Whether a block exists for *key*."""
        return key in self._blocks

    def ended(self, key: Hashable) -> bool:
        """Whether the block at *key* has ended: content for it now would be lost."""
        block = self._blocks.get(key)
        return block is not None and block.ended

    def find(self, block_type: str, content: str, skip: Container[Hashable]) -> Hashable | None:
        """The key of a *block_type* block outside *skip* that holds *content*, if any.

        A tool call holds its id; a text or reasoning block, its text so far, with the
        surrogate pairs its deltas split joined, as *content*'s JSON string joins them.
        """
        for key, block in self._blocks.items():
            if block.kind != block_type or key in skip:
                continue
            held = (
                (block.given_id or block.call_id)
                if block.kind == _TOOL
                else joined_surrogates("".join(block.parts))
            )
            if held == content:
                return key
        return None

    def text_of(self, key: Hashable) -> str:
        """The text so far of the block at *key*, its split surrogate pairs joined (see
        :meth:`find`); empty when there is none."""
        block = self._blocks.get(key)
        return "" if block is None else joined_surrogates("".join(block.parts))

    def finalize(self, key: Hashable, block: ContentBlock) -> None:
        """Make *block* the authoritative content of the block at *key* (created if new)."""
        self._block(key, block.type).final = block

    def finish_tool_call(
        self, key: Hashable, call_id: str | None, name: str | None, arguments: str | None
    ) -> None:
        """Make a completed tool call the authoritative content of the block at *key*.

        What the completed call omits is what its fragments said: its name, its
        arguments, its id (the one minted for a call sent without one, which
        the opening chunk already carried).
        """
        self.tool_call(key, call_id, name, "")
        block = self._blocks[key]
        assert block.call_id is not None  # given, or minted by tool_call
        text = "".join(block.parts) if arguments is None else arguments
        # No arguments at all are an empty object, as an unfinished call's are (build).
        block.final = ToolCall(block.call_id, block.name or "", text or "{}")

    def end(self, key: Hashable) -> BlockEnd | None:
        """Close the block at *key*; ``None`` if it does not exist or was already closed."""
        block = self._blocks.get(key)
        if block is None or block.ended:
            return None
        block.ended = True
        return BlockEnd(block.index, block.build())

    def unnamed_call(self) -> str | None:
        """The first tool call that never got a name, as a failure names it; ``None`` when
        every call has one (walks the blocks: ask once, at the stream's end)."""
        for block in self._blocks.values():
            if block.kind == _TOOL and not block.name:
                return f"tool call {block.given_id or block.call_id!r} (block {block.index})"
        return None

    def end_all(self) -> list[BlockEnd]:
        """Close every open block, in index order."""
        ends = [self.end(key) for key in list(self._blocks)]
        return [end for end in ends if end is not None]

    @property
    def has_tool_calls(self) -> bool:
        """Whether any tool-call block was seen."""
        return any(block.kind == _TOOL for block in self._blocks.values())

    def __len__(self) -> int:
        return len(self._blocks)
