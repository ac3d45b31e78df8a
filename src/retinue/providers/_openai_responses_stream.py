"""OpenAI Responses API streaming decoder (pure)."""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import final

import attrs

from retinue._stream import ABORTED, STOP, TOOL_CALLS, Finish, FinishReason, StreamChunk, UsageChunk

from ._blocks import (
    BlockTable,
    arguments_text,
    block_index,
    delta_text,
    error_event,
    loads_event,
    malformed,
    no_arguments,
    wrong_type,
)
from ._failures import ProviderConnectionError, stream_error
from ._openai_responses_items import Items
from ._openai_responses_numbers import count_after_misstep
from ._openai_responses_parts import Attributed, attribute, left_out, part_texts
from ._openai_responses_usage import incomplete_reason, responses_usage
from ._sse import SseEvent

__all__ = ["ResponsesStreamDecoder"]

JsonObject = dict[str, object]


def _dict(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


_PARAGRAPH = "\n\n"
"""What separates two parts of a reasoning item's summary (each part is a paragraph)."""
_MESSAGE_PARTS = frozenset({"output_text", "refusal"})
"""The content parts of a message item (a reasoning item's parts are not its text)."""


@final
@attrs.define(eq=False)
class ResponsesStreamDecoder:
    """Turn Responses API SSE events into stream chunks."""

    _table: BlockTable = attrs.field(factory=BlockTable, init=False)
    _finish: Finish | None = attrs.field(default=None, init=False)
    _parts: dict[tuple[str, object], tuple[object, object]] = attrs.field(factory=dict, init=False)
    _matched: set[Hashable] = attrs.field(factory=set, init=False)
    """Blocks a complete item was matched to: no other complete content matches them."""
    _items: Items = attrs.field(factory=Items, init=False)
    _signed: set[Hashable] = attrs.field(factory=set, init=False)
    """Reasoning blocks a completed item signed: a repeated item does not sign one twice."""
    _reasoning: Hashable | None = attrs.field(default=None, init=False)
    """The signed reasoning block the calls completed next followed."""
    _held: dict[Hashable, tuple[object, str | None]] = attrs.field(factory=dict, init=False)
    """Per call, the arguments its ``output_item.added`` carried, and the call they name:
    given when the call or the response ends, unless deltas or its completed item replaced them."""
    _streamed_parts: dict[Hashable, Attributed] = attrs.field(factory=dict, init=False)
    """Per block of deltas without a ``content_index``: what the parts completed so far
    account for in it."""
    _next: int = attrs.field(default=0, init=False)
    """The ``sequence_number`` the next event must carry, or ``UNCOUNTED``: the stream is
    not numbered 0, 1, 2, ... on every event (see :func:`count_after_misstep`)."""
    done: bool = attrs.field(default=False, init=False)
    """Whether a terminal event (completed, incomplete) was seen."""

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Decode one event; raises :class:`ProviderStreamError` on ``error`` / ``response.failed``.

        An event of no type that holds an ``error`` is one too (a proxy's), as the
        SDK has it; an event of a type (``response.steer.failed``) may name an error
        that does not end the response. An event numbered out of step is refused as
        malformed (see :func:`count_after_misstep`).
        """
        if event.event == "error":
            raise error_event(event.data, "responses")
        payload = loads_event(event.data)
        kind = payload.get("type")
        if kind is None and event.event and not payload.get("error"):
            # A proxy may leave the type out of the data: the event's SSE name says what
            # it is (Anthropic's SDK takes an event by that name).
            kind = event.event
        expected = self._next
        if expected >= 0:  # not UNCOUNTED
            if payload.get("sequence_number") == expected:
                self._next = expected + 1
            else:
                self._next = count_after_misstep(payload, kind, expected)
        table = self._table
        output: object = payload.get("output_index")
        if type(output) is not int:  # checked off the per-delta path
            output = block_index(payload, "output_index", "responses")
            if output is None:
                output = self._items.key(payload, kind)
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            part = payload.get("content_index")
            if type(part) is not int:
                part = block_index(payload, "content_index", "responses")
            key = ("text", output, part)
            text = payload.get("delta")
            if type(text) is not str:
                text = delta_text(text, f"responses: {kind}'s delta")
            if not text:
                return []  # nothing to add, even after its part came complete (which ends it)
            return [table.more_text(key, text) or self._text_opened(key, payload, text)]
        if kind == "response.function_call_arguments.delta":
            delta = payload.get("delta")
            if type(delta) is not str:
                delta = delta_text(delta, f"responses: {kind}'s delta")
            call = ("call", output)
            if delta and self._held:
                self._held.pop(call, None)  # the deltas are the arguments
            return [table.more_arguments(call, delta) or self._call_opened(call, payload, delta)]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [self._reasoning_delta(output, payload)]
        return self._event(kind, output, payload)

    def _event(self, kind: object, output: object, payload: JsonObject) -> list[StreamChunk]:
        """Decode an event that is no delta: an item's, a part's, the end, an error."""
        if kind == "response.output_item.added":
            return self._item_added(output, _dict(payload.get("item")))
        if kind == "response.output_item.done":
            item = _dict(payload.get("item"))
            return self._item_done(self._items.index_of(output, item.get("id")), item)
        if kind == "response.content_part.done":
            part_output = self._items.index_of(output, payload.get("item_id"))
            return self._content_part_done(part_output, payload)
        if kind in ("response.completed", "response.incomplete"):
            response = payload.get("response")
            if not isinstance(response, dict):
                raise malformed(f"responses: {kind}'s response is no object: {response!r:.80}")
            return self._terminal(response)
        if kind == "response.failed":
            failure = _dict(payload.get("response")).get("error")
            raise stream_error(failure, where="responses")
        if kind == "error" or (kind is None and payload.get("error")):
            raise stream_error(payload.get("error") or payload, where="responses")
        if kind is not None and type(kind) is not str:
            raise wrong_type("responses: an event's type", kind)
        return []

    def _reasoning_delta(self, output: object, payload: JsonObject) -> StreamChunk:
        """A reasoning delta; a new summary or content part starts a new paragraph."""
        key = ("reasoning", output)
        part = (payload.get("summary_index"), payload.get("content_index"))
        delta = payload.get("delta")
        if type(delta) is not str:
            delta = delta_text(delta, f"responses: {payload.get('type')}'s delta")
        if self._table.has(key) and self._parts.get(key) != part:
            delta = _PARAGRAPH + delta
        self._parts[key] = part
        return self._table.reasoning(key, delta)

    def _item_added(self, output: object, item: JsonObject) -> list[StreamChunk]:
        """An item added, its ``output_index`` kept by its id; a call's arguments it carries
        are held until the call ends.

        The API adds each call with none yet (``""``, or ``{}`` from some servers)
        and streams them in deltas. A server that adds a call whole gives them
        here: they are the call's unless deltas follow, which would run together
        with them into no JSON, or its completed item gives others. Only arguments
        that are the call's are read, so a value of another type that deltas
        replace is no failure.
        """
        self._items.added(output, item)
        if item.get("type") != "function_call":
            return []
        call_id, name = _str(item.get("call_id")), _str(item.get("name"))
        key, arguments = ("call", output), item.get("arguments")
        if not no_arguments(arguments):
            self._held[key] = (arguments, call_id or name)
        return [self._table.tool_call(key, call_id, name, "")]

    def _text_opened(
        self, key: tuple[str, object, object], payload: JsonObject, text: str
    ) -> StreamChunk:
        """The first text of the block at *key* (or text after it ended, refused); text whose
        ``item_id`` names an item at another ``output_index`` goes with that item."""
        output, item_id = key[1], payload.get("item_id")
        if type(output) is int:
            named = self._items.streamed_index(output, item_id, "message")
            key = (key[0], named, key[2])
            chunk = self._table.more_text(key, text)
            if chunk is not None:
                return chunk
            self._rekey_placed(named, item_id, "message")
        return self._table.text(key, text)

    def _call_opened(self, key: tuple[str, object], payload: JsonObject, delta: str) -> StreamChunk:
        """The first arguments of the call at *key*: of a call added without an
        ``output_index``, when the delta places it there (see :meth:`Items.place`)."""
        if type(key[1]) is int:
            self._rekey_placed(key[1], payload.get("item_id"), "function_call")
            if delta and self._held:
                self._held.pop(key, None)
        return self._table.tool_call(key, None, None, delta)

    def _rekey_placed(self, output: int, item_id: object, kind: str) -> None:
        """Key a call added without an ``output_index`` by the *output* a delta streaming it
        carries (a message's text blocks are keyed so already: by the delta's)."""
        found = self._items.place(output, item_id, kind)
        if found is None:
            return
        block, placed = ("call", found), ("call", output)
        if self._table.has(block):
            self._table.rekey(block, placed)
        if block in self._held:
            self._held[placed] = self._held.pop(block)

    def _give_held(self, key: Hashable) -> list[StreamChunk]:
        """The arguments the call at *key* was added with, as its delta, when nothing
        replaced them."""
        held = self._held.pop(key, None) if self._held else None
        if held is None:
            return []
        arguments, call = held
        text = arguments_text(arguments, "responses", call)
        return [self._table.tool_call(key, None, None, text)]

    def _item_done(self, output: object, item: JsonObject) -> list[StreamChunk]:
        """A completed output item: its content, unless deltas already streamed it.

        Some compatible servers send no deltas: each item only complete (an
        ``output_item.done``), or only in the completed response's ``output``.
        """
        kind = item.get("type")
        if kind == "function_call":
            return self._call_done(output, item) + self._link_call(item)
        self._items.done(item, output)
        if kind == "message":
            # Calls after an answer's text follow it, not the reasoning: they are not linked.
            self._reasoning = None
            return self._message_done(output, _list(item.get("content")), item.get("id"))
        if kind == "reasoning":
            return self._reasoning_done(output, item)
        return []

    def _settle(self, key: Hashable, block_type: str, content: str | None) -> Hashable | None:
        """The key of the block deltas streamed a complete item or part into, or ``None``.

        Deltas may be keyed otherwise than the complete item (a server leaving
        out ``output_index``, or counting ``content_index`` from 1): a block
        holding the same *content* (a call's id), not matched to a complete
        item yet, is the same block. The block found, or *key*, is matched now.
        """
        found = key if self._table.has(key) else None
        if found is None and content is not None:
            found = self._table.find(block_type, content, self._matched)
        self._matched.add(key if found is None else found)
        return found

    def _streamed_as(self, key: Hashable) -> Hashable | None:
        """*key*, matched now, if deltas streamed a block under it that no complete item
        matched yet: a server that adds no items may name a call's deltas by its call id."""
        if not self._table.has(key) or key in self._matched:
            return None
        self._matched.add(key)
        return key

    def _call_done(self, output: object, item: JsonObject) -> list[StreamChunk]:
        """A completed call's final arguments win; one first seen here opens with them all."""
        call_id, name = _str(item.get("call_id")), _str(item.get("name"))
        sent = item.get("arguments")
        # None: the arguments are the deltas'. An object (some servers) is kept too.
        arguments = None if sent is None else arguments_text(sent, "responses", call_id or name)
        out: list[StreamChunk] = []
        key = self._settle(("call", output), "tool-call", call_id)
        if key is None and call_id is not None:
            key = self._streamed_as(("call", ("item", call_id)))
        if key is None:
            key = ("call", output)
            out.append(self._table.tool_call(key, call_id, name, arguments or ""))
        elif arguments is None:
            out.extend(self._give_held(key))
        else:
            self._held.pop(key, None)
        self._items.done(item, output, key[1] if isinstance(key, tuple) else None)
        self._table.finish_tool_call(key, call_id, name, arguments)
        return out

    def _whole(self, output: object, item_id: object) -> Hashable:
        """The block deltas without a ``content_index`` streamed an item's parts into:
        keyed by its ``output_index``, or, deltas without one either, by its id."""
        whole: Hashable = ("text", output, None)
        if not self._table.has(whole) and isinstance(item_id, str):
            whole = ("text", ("item", item_id), None)
        return whole

    def _message_done(
        self, output: object, parts: list[object], item_id: object
    ) -> list[StreamChunk]:
        """A completed message: each part's text that no delta streamed, in part order."""
        texts = part_texts(parts)
        whole = self._whole(output, item_id)
        if not self._table.has(whole) and len(texts) > 1:
            # Deltas keyed by another output_index too: the block holding all the parts.
            found = self._table.find("text", "".join(text for _, text in texts), self._matched)
            whole = whole if found is None else found
        if self._table.has(whole):
            texts = self._unstreamed(whole, texts)
        out: list[StreamChunk] = []
        taken: set[Hashable] = set()
        for index, text in texts:
            key: Hashable = ("text", output, index)
            if key in taken:
                # An earlier part's deltas were keyed so (parts counted from 1): not this part's.
                key = ("text", output, index, "complete")
            found = self._settle(key, "text", text)
            if found is None:
                out.append(self._table.text(key, text))
            taken.add(key if found is None else found)
        return out

    def _unstreamed(self, whole: Hashable, texts: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """The parts that deltas without a ``content_index`` did not stream into *whole*
        (see :func:`left_out`); *whole* is matched now."""
        self._matched.add(whole)
        return left_out(self._table.text_of(whole), texts)

    def _content_part_done(self, output: object, payload: JsonObject) -> list[StreamChunk]:
        """A completed message part that streamed no delta: its text, before the next part's."""
        part, index = _dict(payload.get("part")), payload.get("content_index")
        kind = part.get("type")
        if kind is not None and type(kind) is not str:
            raise malformed(f"response.content_part.done: part.type is not a string: {kind!r}")
        if type(index) is not int or kind not in _MESSAGE_PARTS:
            return []
        table, key = self._table, ("text", output, index)
        texts = part_texts([part])
        if table.has(key) or not texts:
            return []
        text = texts[0][1]
        whole = self._whole(output, payload.get("item_id"))
        if table.has(whole):
            return self._part_beside_whole(whole, output, index, text)
        # A block of deltas keyed otherwise may hold this part: it is left for the item's
        # output_item.done to match, which counts the parts by their place in its content.
        # A block ended already is a part sent complete too (this one may repeat its text).
        found = table.find("text", text, self._matched)
        if found is not None and not table.ended(found):
            return []
        # Not matched yet: its item's output_item.done, keyed otherwise, must find it.
        return self._complete(key, text)

    def _complete(self, key: Hashable, text: str) -> list[StreamChunk]:
        """The block of a part sent complete, ended at once: a delta for it after its
        complete text (a part streamed after it was completed) is refused as malformed,
        where it would run on from that text, the part given twice."""
        delta, end = self._table.text(key, text), self._table.end(key)
        return [delta] if end is None else [delta, end]

    def _part_beside_whole(
        self, whole: Hashable, output: object, index: int, text: str
    ) -> list[StreamChunk]:
        """A completed part beside deltas without a ``content_index``, which stream the
        parts into one block, *whole*, in part order: the parts it does not hold."""
        done = self._streamed_parts.get(whole, Attributed())
        if any(index == seen for seen, _ in done.parts):
            return []  # a repeated event
        streamed, later = self._table.text_of(whole), bool(done.parts) and index < done.parts[-1][0]
        left, now = attribute(streamed, done, index, text)
        self._streamed_parts[whole] = now
        if later:
            # Completed after a later part, which the deltas so far were counted to:
            # which parts the block holds is read from their texts.
            left = tuple(left_out(streamed, now.parts))
        table, keys = self._table, [(("text", output, part), text) for part, text in left]
        return [table.text(key, part_text) for key, part_text in keys if not table.has(key)]

    def _reasoning_done(self, output: object, item: JsonObject) -> list[StreamChunk]:
        """A completed reasoning item: its text, unless deltas streamed it, and the item.

        The item itself, as a line of JSON, signs the block (see
        :func:`responses_reasoning_item`), and each function call completed
        after it adds its ids: the next request of the turn sends them back
        together. Its ``encrypted_content`` is complete only here. An item
        without a summary (the request asked for none) is still a block, empty.
        """
        key = ("reasoning", output)
        summary = _list(item.get("summary")) or _list(item.get("content"))
        parts = [text for _, text in part_texts(summary)]
        text = _PARAGRAPH.join(parts)
        found = self._settle(key, "reasoning", text or None)
        if found is None and len(parts) > 1:
            # Deltas without a summary_index ran the parts together, keyed otherwise.
            found = self._settle(key, "reasoning", "".join(parts))
        block = key if found is None else found
        signature = self._signature(block, item)
        self._reasoning = block if block in self._signed else None
        if found is not None:
            return [self._table.reasoning(found, "", signature)] if signature else []
        if not text and signature is None:
            return []
        return [self._table.reasoning(key, text, signature)]

    def _signature(self, key: Hashable, item: JsonObject) -> str | None:
        """The item as the signature of the block at *key*; ``None`` for an item without an
        id (the API needs it back), or when that block is signed already."""
        if not _str(item.get("id")) or key in self._signed:
            return None
        try:
            signature = json.dumps(item, separators=(",", ":"), allow_nan=False)
        except ValueError:  # NaN from a compatible server: JSON cannot write it back
            return None
        self._signed.add(key)
        return signature

    def _link_call(self, item: JsonObject) -> list[StreamChunk]:
        """The ids of a completed call, added to the signature of the reasoning before it."""
        call_id, item_id = _str(item.get("call_id")), _str(item.get("id"))
        if self._reasoning is None or not call_id or not item_id:
            return []
        link = json.dumps({"call_id": call_id, "id": item_id}, separators=(",", ":"))
        return [self._table.reasoning(self._reasoning, "", "\n" + link)]

    def _terminal(self, response: JsonObject) -> list[StreamChunk]:
        """The response's end: its ``output`` when nothing streamed, usage, the finish.

        Raises:
            ProviderStreamError: the response's status is ``failed``.
        """
        if response.get("status") == "failed":
            # A failed response is no answer, whichever event (or whole body) brought it.
            raise stream_error(response.get("error"), where="responses")
        self.done = True
        out: list[StreamChunk] = []
        if not self._table:
            # Only a server that streamed no item sends its answer here alone. After a
            # streamed one, positions in this list need not match the stream's
            # output_index (a server may leave it out): replaying would double.
            for position, item in enumerate(_list(response.get("output"))):
                out.extend(self._item_done(position, _dict(item)))
        usage = response.get("usage")
        if isinstance(usage, dict):
            self._table.usage = responses_usage(usage)
        self._finish = Finish(self._end_reason(response))
        return out

    def _end_reason(self, response: JsonObject) -> FinishReason:
        """The finish a final response's ``status`` and ``incomplete_details`` give."""
        status = response.get("status")
        if status == "cancelled":
            # Cancelled at the provider, not by the loop: the output is partial, no stop.
            return ABORTED
        reason = _dict(response.get("incomplete_details")).get("reason")
        if status == "incomplete" or reason is not None:
            return incomplete_reason(_str(reason) or "incomplete")
        return TOOL_CALLS if self._table.has_tool_calls else STOP

    def feed_body(self, payload: JsonObject) -> list[StreamChunk]:
        """Decode a whole non-streaming response object.

        Raises:
            ProviderStreamError: the body is an error object (a failed response,
                with or without its error, or a proxy's error sent with status
                200) or has no ``output``.
        """
        if payload.get("error") or payload.get("status") == "failed":
            # A failed response may carry no error object: it is still no answer.
            raise stream_error(payload.get("error"), where="responses")
        if not isinstance(payload.get("output"), list):
            raise malformed("the responses response has no output list")
        self._terminal(payload)
        return []

    def close(self) -> list[StreamChunk]:
        """End the stream: block ends, usage, finish.

        Raises:
            ProviderConnectionError: the stream ended before a terminal event.
        """
        if self._finish is None:
            raise ProviderConnectionError(
                "the responses stream ended before it was complete",
                code="STREAM_TRUNCATED",
                retryable=True,
            )
        # Calls added whole whose arguments nothing replaced: each was opened by a chunk already.
        out = [chunk for key in list(self._held) for chunk in self._give_held(key)]
        out.extend(self._table.end_all())
        if self._table.usage is not None:
            out.append(UsageChunk(self._table.usage))
        out.append(self._finish)
        return out
