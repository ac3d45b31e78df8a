"""Anthropic Messages wire format: request bodies and the streaming decoder (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

import attrs

from retinue._content import (
    RedactedReasoning,
)
from retinue._stream import (
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    Errored,
    Finish,
    FinishReason,
    StreamChunk,
    Usage,
    UsageChunk,
    finish_named,
)

from ._anthropic_request import (
    DEFAULT_MAX_TOKENS,
    MIN_THINKING_BUDGET,
    anthropic_request_body,
    no_room_beside_thinking,
)
from ._blocks import (
    BlockTable,
    arguments_text,
    block_index,
    delta_text,
    error_event,
    loads_event,
    malformed,
    wrong_type,
)
from ._counts import optional_count, token_count
from ._failures import ProviderConnectionError, stream_error
from ._sse import SseEvent

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MIN_THINKING_BUDGET",
    "AnthropicStreamDecoder",
    "anthropic_finish",
    "anthropic_request_body",
    "anthropic_usage",
    "no_room_beside_thinking",
]

JsonObject = dict[str, object]


def _dict(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _text_field(block: JsonObject, field: str, what: str) -> str | None:
    """The string *field* of *block* (*what* names it), ``None`` when absent or null.

    Raises:
        ProviderStreamError: ``MALFORMED_RESPONSE``: the field is of another type; read
            as absent, the name, text or signature it holds would be lost without a word.
    """
    value = block.get(field)
    if value is None or type(value) is str:
        return value
    raise wrong_type(f"anthropic messages: {what}", value)


def anthropic_usage(usage: JsonObject) -> Usage:
    """Map an Anthropic ``usage`` object to :class:`Usage` (its input counts are already
    disjoint; thinking stays within the output, as the API counts it)."""
    thinking = _dict(usage.get("output_tokens_details")).get("thinking_tokens")
    return Usage(
        input_tokens=token_count(usage.get("input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        cache_read_tokens=optional_count(usage.get("cache_read_input_tokens")),
        cache_write_tokens=optional_count(usage.get("cache_creation_input_tokens")),
        reasoning_tokens=optional_count(thinking),
    )


def _merge_usage(usage: JsonObject, update: Mapping[str, object]) -> None:
    """Merge a usage update; a count sent as ``null`` keeps what is known (fields are optional)."""
    usage.update((key, value) for key, value in update.items() if value is not None)


def anthropic_finish(name: str | None, details: Mapping[str, object] | None = None) -> FinishReason:
    """Map an Anthropic ``stop_reason`` (and its ``stop_details``) to a :data:`FinishReason`."""
    if name is None or name in ("end_turn", "stop_sequence"):
        return STOP
    if name == "tool_use":
        return TOOL_CALLS
    if name in ("max_tokens", "model_context_window_exceeded"):
        return MAX_TOKENS
    if name == "refusal":
        return Errored(_refusal_message(details or {}), code="refusal")
    return finish_named(name)


def _refusal_message(details: Mapping[str, object]) -> str:
    """Why the model refused, as the API's ``stop_details`` say: its policy category and
    explanation, when given (either may be ``null``)."""
    category, explanation = _str(details.get("category")), _str(details.get("explanation"))
    message = "the model refused to answer"
    if category:
        message += f" ({category})"
    return f"{message}: {explanation}" if explanation else message


def _index(payload: JsonObject, kind: str) -> int:
    """A *kind* event's index: the API always sends one (read as its own block, text splits)."""
    index = block_index(payload, "index", "anthropic messages")
    if index is None:
        raise malformed(f"anthropic messages: a {kind} event without an index")
    return index


_MODELLED_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})
"""The content block types decoded; the others (a server tool's call or result) are left out."""
_DELTA_BLOCKS = {
    "text_delta": "text",
    "input_json_delta": "tool_use",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
}
"""The block type each delta adds to."""
_WHOLE_BLOCKS = frozenset({"redacted_thinking"})
"""The block types sent whole in their start: no delta adds to them."""


@final
@attrs.define(eq=False)
class AnthropicStreamDecoder:
    """Turn Anthropic Messages SSE events into stream chunks."""

    _table: BlockTable = attrs.field(factory=BlockTable, init=False)
    _usage: JsonObject = attrs.field(factory=dict, init=False)
    _stop_reason: str | None = attrs.field(default=None, init=False)
    _stop_details: JsonObject = attrs.field(factory=dict, init=False)
    _stopped: bool = attrs.field(default=False, init=False)
    # Blocks of a type left out: a server tool's call streams input_json_delta too, and
    # its deltas would otherwise open a client tool call, which the agent would run.
    _left_out: set[int] = attrs.field(factory=set, init=False)
    # Per index, the type its block started as (or its first delta's block type).
    _block_types: dict[object, str] = attrs.field(factory=dict, init=False)
    # Per block, what deltas replace and the block's end gives: a call's input its start
    # carried, as JSON text, unless input deltas follow; a thinking block's signature, the
    # newest of its start's and its signature deltas'.
    _held: dict[object, str] = attrs.field(factory=dict, init=False)
    # Whether a block started: from then on every block is expected to (R10.6 allows
    # streams of deltas alone).
    _started: bool = attrs.field(default=False, init=False)
    done: bool = attrs.field(default=False, init=False)
    """Whether ``message_stop`` was seen."""

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Decode one event; an ``error`` event raises :class:`ProviderStreamError`."""
        if event.event == "error":
            raise error_event(event.data, "anthropic messages")
        payload = loads_event(event.data)
        kind = payload.get("type")
        if kind is None and event.event and not payload.get("error"):
            # A proxy may leave the type out of the data: the event's SSE name says what
            # it is (Anthropic's SDK takes an event by that name).
            kind = event.event
        if kind == "content_block_delta":
            index = payload.get("index")
            if type(index) is not int:  # checked off the per-delta path
                index = _index(payload, kind)
            if self._left_out and index in self._left_out:
                return []
            return self._delta(index, _dict(payload.get("delta")))
        if kind == "content_block_start":
            index = _index(payload, kind)
            if self._table.has(index) or index in self._left_out:
                # Its deltas would land in the earlier block, whose end has gone out,
                # or be left out with a server tool's block.
                raise malformed(f"anthropic messages: block {index!r} started twice")
            return self._start(index, _dict(payload.get("content_block")))
        if kind == "content_block_stop":
            return self._end(_index(payload, kind))
        if kind == "message_start":
            _merge_usage(self._usage, _dict(_dict(payload.get("message")).get("usage")))
        elif kind == "message_delta":
            self._message_delta(payload)
        elif kind == "message_stop":
            if not self._stopped:
                # The API says how the answer ended first: read as a stop, a cut one passes.
                raise malformed("anthropic messages: message_stop came before any message_delta")
            self.done = True
        elif kind == "error" or (kind is None and payload.get("error")):
            raise stream_error(payload.get("error"), where="anthropic messages")
        elif kind is not None and type(kind) is not str:
            raise wrong_type("anthropic messages: an event's type", kind)
        return []

    def _message_delta(self, payload: JsonObject) -> None:
        """Take how the answer ended, and the usage so far, from a ``message_delta``."""
        _merge_usage(self._usage, _dict(payload.get("usage")))
        delta = payload.get("delta")
        if delta is None:
            delta = {}
        elif type(delta) is not dict:
            # Read as empty, it would end an answer cut at its limit as a stop.
            raise wrong_type("anthropic messages: a message_delta's delta", delta, "an object")
        stop_reason = delta.get("stop_reason")
        if stop_reason is not None and type(stop_reason) is not str:
            raise wrong_type("anthropic messages: message_delta's stop_reason", stop_reason)
        if stop_reason is not None or not self._stopped:  # a later one may carry usage alone
            self._stop_reason = stop_reason
            self._stop_details = _dict(delta.get("stop_details"))
        self._stopped = True

    def _start(self, index: int, block: JsonObject) -> list[StreamChunk]:
        kind, table = block.get("type"), self._table
        if type(kind) is not str:
            # Read as no type, a call's start would leave its deltas a call without a name.
            raise wrong_type("anthropic messages: a content_block's type", kind)
        self._block_types[index] = kind
        self._started = True
        if kind not in _MODELLED_BLOCKS:
            # As in the SDK, a delta goes only to a block of its kind: a server tool's
            # call (server_tool_use, mcp_tool_use) streams input_json_delta, but it is
            # not the client's to run.
            self._left_out.add(index)
            return []
        if kind == "tool_use":
            return [self._start_call(index, block)]
        if kind == "redacted_thinking":
            data = _text_field(block, "data", "a redacted_thinking block's data")
            table.finalize(index, RedactedReasoning(data or ""))
            return []
        field = "thinking" if kind == "thinking" else "text"
        text = _text_field(block, field, f"a {kind} block's {field}") or ""
        if kind == "thinking":
            # A block sent whole carries its signature here (an empty one is none), unless
            # a signature_delta follows: as in the SDK, that replaces it.
            signature = _text_field(block, "signature", "a thinking block's signature")
            if signature:
                self._held[index] = signature
            # Opened now, even without text: the block keeps its place in the message.
            return [table.reasoning(index, text)] if text or signature else []
        return [table.text(index, text)] if text and kind == "text" else []

    def _start_call(self, index: int, block: JsonObject) -> StreamChunk:
        """A tool call's start; the input it carries is held until the block ends.

        The API starts each call with an empty input and streams it in deltas.
        A start that carries the input is a call sent whole, unless deltas
        follow: as in the SDK, they then replace it, where the two run together
        would be no JSON.
        """
        call_id = _str(block.get("id"))
        name = _text_field(block, "name", "a tool_use block's name")
        initial = block.get("input")
        if not isinstance(initial, dict | None):
            # As Chat and Responses refuse arguments of another type: a call run
            # with none would hide what the model sent.
            raise malformed(
                f"anthropic messages: the input of tool call {call_id or name!r} is of type "
                f"{type(initial).__name__}, not an object"
            )
        if initial:
            self._held[index] = arguments_text(initial, "anthropic messages", call_id or name)
        return self._table.tool_call(index, call_id, name, "")

    def _give_held(self, index: object) -> list[StreamChunk]:
        """What a block holds till its end (a call's input, a thinking signature), as a delta."""
        held = self._held.pop(index, None) if self._held else None
        if held is None:
            return []
        if self._block_types.get(index) == "thinking":
            return [self._table.reasoning(index, "", held)]
        return [self._table.tool_call(index, None, None, held)]

    def _end(self, index: int) -> list[StreamChunk]:
        """A block's end, after what its start held."""
        out = self._give_held(index)
        end = self._table.end(index)
        return out if end is None else [*out, end]

    def _delta(self, index: object, delta: JsonObject) -> list[StreamChunk]:
        kind, table = delta.get("type"), self._table
        if not self._fits(index, kind):
            return []
        if kind == "text_delta":
            text = delta.get("text")
            if type(text) is not str:
                text = delta_text(text, "anthropic messages: a text_delta's text")
            return [table.text(index, text)] if text else []
        if kind == "input_json_delta":
            part = delta.get("partial_json")
            if type(part) is not str:
                part = delta_text(part, "anthropic messages: an input_json_delta's partial_json")
            if not part:
                return []  # the API opens a call's input with an empty one
            if self._held:
                self._held.pop(index, None)  # the deltas are the input
            return [table.tool_call(index, None, None, part)]
        if kind == "thinking_delta":
            text = delta.get("thinking")
            if type(text) is not str:
                text = delta_text(text, "anthropic messages: a thinking_delta's thinking")
            return [table.reasoning(index, text)] if text else []
        if kind == "signature_delta":
            # An empty signature is none: the API would refuse the block it marks.
            signature = _text_field(delta, "signature", "a signature_delta's signature")
            if signature and table.ended(index):
                # Its end has gone out: as any other delta after it, it would be lost.
                raise malformed(f"content for block {index!r} came after the block ended")
            if signature:
                # As in the SDK, a signature replaces the one before: joined, the API
                # would refuse them.
                self._held[index] = signature
        return []

    def _fits(self, index: object, kind: object) -> bool:
        """Whether a delta of *kind* may add to the block at *index*; a delta of another
        block type than its block's is refused as malformed.

        Added to that block it would become content of the wrong kind: thinking
        in the answer's text, or a tool call no model made, run by the agent.
        A block sent whole (redacted thinking) takes no delta: one for it is
        left out, as the SDK leaves it.

        Raises:
            ProviderStreamError: ``MALFORMED_RESPONSE``, naming the delta and the block,
                or a delta whose type is no string.
        """
        wanted = _DELTA_BLOCKS.get(kind) if isinstance(kind, str) else None
        if wanted is None:
            if type(kind) is not str:
                # Read as a delta of no kind, its text or input would be lost without a word.
                raise wrong_type("anthropic messages: a content_block_delta's delta's type", kind)
            return True  # a delta retinue does not decode (citations) adds nothing
        started = self._block_types.get(index)
        if started is None:
            started = self._block_types[index] = self._unstarted(index, kind, wanted)
        if started == wanted:
            return True
        if started in _WHOLE_BLOCKS:
            return False
        raise malformed(
            f"anthropic messages: {kind} for block {index!r}, which is a {started} block"
        )

    def _unstarted(self, index: object, kind: object, wanted: str) -> str:
        """The block type a delta of *kind* opens at *index*, which no start opened:
        text and thinking may stream without starts (R10.6).

        Raises:
            ProviderStreamError: ``MALFORMED_RESPONSE``: the delta is a call's input,
                whose name only a start carries (run, it would be a call to no tool),
                or other blocks started: its text would be split from its block's.
        """
        if wanted == "tool_use" or self._started:
            raise malformed(f"anthropic messages: {kind} for block {index!r}, which never started")
        return wanted

    def feed_body(self, payload: JsonObject) -> list[StreamChunk]:
        """Decode a whole non-streaming ``message`` object.

        Raises:
            ProviderStreamError: the body is an error object (some proxies send
                one with status 200) or has no ``content`` list.
        """
        if payload.get("type") == "error" or payload.get("error"):
            raise stream_error(payload.get("error") or payload, where="anthropic messages")
        content = payload.get("content")
        if not isinstance(content, list):
            raise malformed("the anthropic messages response has no content list")
        for index, entry in enumerate(content):
            self._start(index, _dict(entry))
            self._give_held(index)  # a block sent whole has no deltas to wait for
        _merge_usage(self._usage, _dict(payload.get("usage")))
        self._stop_reason = _str(payload.get("stop_reason"))
        self._stop_details = _dict(payload.get("stop_details"))
        self.done = self._stopped = True
        return []

    def close(self) -> list[StreamChunk]:
        """End the stream: remaining block ends, usage, finish.

        Raises:
            ProviderConnectionError: the stream ended before ``message_delta``/``message_stop``.
            ProviderStreamError: ``MALFORMED_RESPONSE``: a tool call was never named.
        """
        if not self.done and not self._stopped:
            raise ProviderConnectionError(
                "the anthropic messages stream ended before it was complete",
                code="STREAM_TRUNCATED",
                retryable=True,
            )
        unnamed = self._table.unnamed_call()
        if unnamed is not None:
            raise malformed(f"anthropic messages: {unnamed} was never named")
        # Blocks the stream never ended: each was opened by a chunk already.
        out = [chunk for index in list(self._held) for chunk in self._give_held(index)]
        out.extend(self._table.end_all())
        if self._usage:
            out.append(UsageChunk(anthropic_usage(self._usage)))
        out.append(Finish(anthropic_finish(self._stop_reason, self._stop_details)))
        return out
