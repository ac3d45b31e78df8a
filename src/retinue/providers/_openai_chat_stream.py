"""OpenAI Chat Completions streaming decoder, usage and finish reasons (pure)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import final

import attrs

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

from ._blocks import (
    BlockTable,
    arguments_text,
    delta_text,
    error_event,
    loads_event,
    malformed,
    wrong_type,
)
from ._counts import optional_count, token_count, uncached_input
from ._failures import ProviderConnectionError, ProviderStreamError, stream_error
from ._sse import SseEvent

__all__ = ["ChatStreamDecoder", "chat_finish", "chat_usage"]

JsonObject = dict[str, object]


def _dict(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _part_text(text: object, what: str) -> str:
    """A content part's text: ``null`` is empty, any other value no string is refused."""
    if type(text) is str:
        return text
    return delta_text(text, f"chat completions: {what}")


def _thinking_texts(thinking: object, position: int) -> list[str]:
    """The texts of a thinking part's ``thinking``: a string, or a list of strings and text
    pieces; a value of another JSON type is refused (its reasoning would be lost)."""
    where = f"content part {position}'s thinking"
    if thinking is None or type(thinking) is str:
        return [thinking] if thinking else []
    if type(thinking) is not list:
        raise wrong_type(f"chat completions: {where}", thinking, "a string or a list")
    texts = []
    for piece in thinking:
        if type(piece) is dict:
            piece = piece.get("text")  # noqa: PLW2901 - a piece's text stands for it
        text = _part_text(piece, f"{where}'s piece")
        if text:
            texts.append(text)
    return texts


def chat_usage(usage: JsonObject) -> Usage:
    """Map a Chat Completions ``usage`` object to :class:`Usage` counts, the input ones
    disjoint (reasoning stays within the output, as the API counts it)."""
    prompt = _dict(usage.get("prompt_tokens_details"))
    completion = _dict(usage.get("completion_tokens_details"))
    cached: int | None = None
    if "cached_tokens" in prompt:
        cached = token_count(prompt["cached_tokens"])
    elif "prompt_cache_hit_tokens" in usage:
        cached = token_count(usage["prompt_cache_hit_tokens"])
    written = optional_count(prompt.get("cache_write_tokens"))
    return Usage(
        input_tokens=uncached_input(usage.get("prompt_tokens"), cached, written),
        output_tokens=token_count(usage.get("completion_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=optional_count(completion.get("reasoning_tokens")),
    )


def chat_finish(name: str | None) -> FinishReason:
    """Map a Chat Completions ``finish_reason`` to a :data:`FinishReason`."""
    if name is None or name == "stop":
        return STOP
    if name in ("tool_calls", "function_call"):
        return TOOL_CALLS
    if name == "length":
        return MAX_TOKENS
    if name == "content_filter":
        return Errored("the provider's content filter stopped the output", code="content_filter")
    if name == "insufficient_system_resource":
        # DeepSeek's: its server cut the answer short, which an open finish would pass as whole.
        return Errored(
            "the provider ran out of resources and cut the output short",
            code="insufficient_system_resource",
        )
    return finish_named(name)


def _indexed_calls(message: JsonObject) -> JsonObject:
    """A whole message whose tool calls carry their place in it as their ``index``.

    Its calls are complete, so two that share an id (some servers give parallel
    calls one) are two calls, not fragments of one.
    """
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return message
    placed = [
        {**call, "index": position}
        if isinstance(call, dict) and type(call.get("index")) is not int
        else call
        for position, call in enumerate(calls)
    ]
    return {**message, "tool_calls": placed}


def _choice_index(value: object) -> int:
    """A choice's ``index`` that is no int: ``null`` is the first choice, as an absent
    index is; any other value (a bool, a string) is refused: read as another choice's,
    the answer's text, or its finish, would be left out without a word."""
    if value is None:
        return 0
    raise wrong_type("chat completions: a choice's index", value, "an integer")


def _choice_number(choice: JsonObject) -> int:
    """A choice's ``index``, ``0`` when absent or null (see :func:`_choice_index`)."""
    number = choice.get("index", 0)
    return number if type(number) is int else _choice_index(number)


def _delta_object(value: object) -> JsonObject:
    """A choice's ``delta`` that is no object: ``null`` carries nothing; any other value
    is refused, as read as empty its text would be lost."""
    if value is None:
        return {}
    raise wrong_type("chat completions: a choice's delta", value, "an object")


def _truncated(what: str) -> ProviderConnectionError:
    return ProviderConnectionError(
        f"the chat completions stream ended {what}", code="STREAM_TRUNCATED", retryable=True
    )


@final
@attrs.define(eq=False)
class ChatStreamDecoder:
    """Turn Chat Completions SSE events into stream chunks.

    Deltas are yielded as they arrive; block ends, usage and the finish come
    from :meth:`close`, because the usage chunk follows the finish reason.

    ``expect_usage`` says the server is known to send the usage the request
    asks for (``stream_options.include_usage``): a stream that ends after its
    finish reason with neither usage nor ``[DONE]`` was then cut, and one
    that sent that usage is complete there. Without it such a stream is
    complete, as some compatible servers send neither.
    """

    expect_usage: bool = attrs.field(default=False, kw_only=True)
    _table: BlockTable = attrs.field(factory=BlockTable, init=False)
    _finish: str | None = attrs.field(default=None, init=False)
    _unindexed: dict[str, tuple[str, int]] = attrs.field(factory=dict, init=False)
    _current_call: tuple[str, int] | None = attrs.field(default=None, init=False)
    _calls_without_id: int = attrs.field(default=0, init=False)
    # Per index: the id of the call it carries now, and that call's block key.
    _indexed: dict[int, tuple[str | None, tuple[str, int, int]]] = attrs.field(
        factory=dict, init=False
    )
    # The blocks of calls that are not a function's, left out with all their fragments.
    _left_out: set[Hashable] = attrs.field(factory=set, init=False)
    done: bool = attrs.field(default=False, init=False)
    """Whether ``[DONE]`` was seen, or (``expect_usage``) the usage after the finish
    reason; nothing more is expected."""

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Decode one event; raises :class:`ProviderStreamError` on an error event."""
        if event.data == b"[DONE]":
            self.done = True
            return []
        if event.event == "error":
            raise error_event(event.data, "chat completions")
        try:
            payload = loads_event(event.data)
        except ProviderStreamError:
            # Some servers pad the sentinel; checked only here, off the per-event path.
            if event.data.strip() != b"[DONE]":
                raise
            self.done = True
            return []
        if payload.get("error"):
            raise stream_error(payload["error"], where="chat completions")
        usage = payload.get("usage")
        choices = payload.get("choices")
        if isinstance(usage, dict):
            self._table.usage = chat_usage(usage)
            if self.expect_usage and self._finish is not None and choices in (None, []):
                # The usage chunk, choiceless, after the finish reason is the last data
                # event: ``[DONE]`` adds nothing, and a server may hold the body open.
                self.done = True
                return []
        out: list[StreamChunk] = []
        if isinstance(choices, list):
            for choice in choices:
                if not isinstance(choice, dict):
                    raise wrong_type("chat completions: a chunk's choice", choice, "an object")
                number = choice.get("index", 0)
                if type(number) is not int:
                    number = _choice_index(number)
                if number == 0:
                    self._choice(choice, out)
        elif choices is not None:
            raise wrong_type("chat completions: a chunk's choices", choices, "a list")
        return out

    def _choice(self, choice: JsonObject, out: list[StreamChunk]) -> None:
        delta = choice.get("delta")
        if type(delta) is not dict:
            delta = _delta_object(delta)
        table = self._table
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            out.append(table.reasoning("reasoning", reasoning))
        # A refusal arrives with ``content`` null; it is the answer the model gave.
        for field in ("content", "refusal"):
            text = delta.get(field)
            if isinstance(text, str) and text:
                out.append(table.text("text", text))
            elif type(text) is list:
                self._content_parts(text, out)
            elif text is not None and not isinstance(text, str):
                raise wrong_type(
                    f"chat completions: a delta's {field}", text, "a string or a list of parts"
                )
        calls = delta.get("tool_calls")
        if type(calls) is list:
            for position, call in enumerate(calls):
                chunk = self._tool_call(position, _dict(call))
                if chunk is not None:
                    out.append(chunk)
        elif calls is not None:
            # Read as none, a tool-calls finish would come without its calls.
            raise wrong_type("chat completions: a delta's tool_calls", calls, "a list")
        legacy = delta.get("function_call")
        if legacy is not None:
            out.append(self._legacy_call(legacy))
        finish = choice.get("finish_reason")
        # Ollama and SGLang send "" on every chunk before the last: that is no finish yet.
        if isinstance(finish, str):
            if finish:
                self._finish = finish
        elif finish is not None:
            # Read as none, a cut-short answer would end as a stop.
            raise wrong_type("chat completions: a choice's finish_reason", finish)

    def _content_parts(self, parts: list[object], out: list[StreamChunk]) -> None:
        """Content sent as a list of parts, as Mistral's endpoint sends it: text parts are
        text, and thinking parts (its reasoning models') reasoning. A part of another
        kind (a reference) carries nothing retinue models; a part that is no object, or
        a text of another JSON type, is refused: read as none, the text would be lost."""
        table = self._table
        for position, part in enumerate(parts):
            if type(part) is not dict:
                raise wrong_type(f"chat completions: content part {position}", part, "an object")
            kind = part.get("type")
            if kind == "text":
                text = _part_text(part.get("text"), f"content part {position}'s text")
                if text:
                    out.append(table.text("text", text))
            elif kind == "thinking":
                texts = _thinking_texts(part.get("thinking"), position)
                out.extend(table.reasoning("reasoning", text) for text in texts)

    def _call_key(
        self, position: int, call_id: str | None, index: object, *, opens: bool
    ) -> tuple[str, int] | tuple[str, int, int]:
        """The block of a tool-call fragment; *opens* if it names a tool and its arguments
        open an object.

        Some compatible servers omit ``index``: a new ``id`` then starts a new
        call, and a fragment without one continues the latest call. Others
        give every call the same index: there too a new ``id`` starts a new
        call. A non-streamed message has neither an index nor fragments, so
        its position in the list identifies the call when ids are missing too.
        Without an id, a fragment that *opens* after a whole call starts a new one.
        """
        if type(index) is int:
            return self._indexed_key(index, call_id, opens=opens)
        if index is not None:
            # A bool is an int to Python: true would join the fragment to call 1.
            raise wrong_type("chat completions: a tool call's index", index, "an integer")
        if call_id is None:
            key = self._current_call or ("call", position)
            if self._follows(key, opens=opens):
                self._calls_without_id += 1
                key = self._current_call = ("call-without-id", self._calls_without_id)
            return key
        key = self._unindexed.setdefault(call_id, ("unindexed-call", len(self._unindexed)))
        self._current_call = key
        return key

    def _indexed_key(self, index: int, call_id: str | None, *, opens: bool) -> tuple[str, int, int]:
        known = self._indexed.get(index)
        if (
            known is None
            or (call_id is not None and known[0] != call_id and self._keeps_its_id(known))
            or (call_id is None and self._follows(known[1], opens=opens))
        ):
            generation = 0 if known is None else known[1][2] + 1
            known = (call_id, ("call", index, generation))
        elif call_id is not None:
            known = (call_id, known[1])
        self._indexed[index] = known
        return known[1]

    def _keeps_its_id(self, known: tuple[str | None, tuple[str, int, int]]) -> bool:
        """Whether the call *known* at an index cannot take another id: it has one, or
        it was left out. A function call may get its id in a later fragment; a call
        left out never does, so a fragment with an id after it is the next call."""
        return known[0] is not None or known[1] in self._left_out

    def _follows(self, key: tuple[str, int] | tuple[str, int, int], *, opens: bool) -> bool:
        """Whether a fragment without an id that *opens* is the call after the one at *key*:
        that one is named and its arguments are whole (asked only of such a fragment)."""
        return opens and self._table.holds_whole_call(key)

    def _tool_call(self, position: int, call: JsonObject) -> StreamChunk | None:
        """A tool-call fragment's chunk; ``None`` for one of a call that is not a function's."""
        function = _dict(call.get("function"))
        call_id, name = call.get("id"), function.get("name")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        name = name if isinstance(name, str) else None
        raw = function.get("arguments")
        if call_id is None and not name and not raw:
            return None  # a fragment carrying nothing (null, {}) opens and adds nothing
        kind = call.get("type")
        foreign = isinstance(kind, str) and kind not in ("", "function")
        # Gemini sends each parallel call whole, every one at index 0 and with no id:
        # a fragment naming a tool whose arguments open an object, after a named call
        # whose arguments are whole JSON, is the next call. A server naming the tool
        # in every fragment of one call can only add whitespace to whole arguments.
        # (An object sent as the arguments is JSON text opening one.)
        opens = (
            not foreign
            and bool(name)
            and (isinstance(raw, dict) or (isinstance(raw, str) and raw.lstrip().startswith("{")))
        )
        key = self._call_key(position, call_id, call.get("index"), opens=opens)
        if self._left_out and key in self._left_out:
            return None
        if foreign and not self._table.has(key):
            # A custom call (free-form input) is no function call: retinue declares
            # none such, and the SDK's parser leaves them out. Only the fragment
            # opening a call tells its type; its later ones are known by their block.
            self._left_out.add(key)
            return None
        arguments = arguments_text(raw, "chat completions", call_id or name)
        return self._table.tool_call(key, call_id, name, arguments)

    def _legacy_call(self, call: object) -> StreamChunk:
        """A fragment of a call in the deprecated ``function_call`` form, which some
        compatible servers still send: one call per message, with no id, so the block
        mints it one (the SDK parses this form too: it is the model's call to run).

        Raises:
            ProviderStreamError: ``MALFORMED_RESPONSE``: the field is not an object.
        """
        if not isinstance(call, dict):
            raise malformed(
                "chat completions: a message's function_call is of type "
                f"{type(call).__name__}, not an object"
            )
        name = call.get("name")
        name = name if isinstance(name, str) else None
        arguments = arguments_text(call.get("arguments"), "chat completions", name)
        return self._table.tool_call("function_call", None, name, arguments)

    @property
    def sent_usage(self) -> bool:
        """Whether the stream carried usage."""
        return self._table.usage is not None

    def feed_body(self, payload: JsonObject) -> list[StreamChunk]:
        """Decode a whole non-streaming ``chat.completion`` (a server that ignored ``stream``).

        Raises:
            ProviderStreamError: the body is an error object (some proxies send
                one with status 200) or carries no first choice (``index`` 0) with a message.
        """
        if payload.get("error"):
            raise stream_error(payload["error"], where="chat completions")
        choices = payload.get("choices")
        # The first choice is the answer, as in a stream: others are alternatives to it.
        answers = [
            c
            for c in _list(choices)
            if isinstance(c, dict) and "message" in c and _choice_number(c) == 0
        ]
        if not answers:
            raise malformed("the chat completions response has no first choice with a message")
        for choice in answers:
            self._choice({**choice, "delta": _indexed_calls(_dict(choice["message"]))}, [])
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self._table.usage = chat_usage(usage)
        self.done = True
        return []

    def close(self) -> list[StreamChunk]:
        """End the stream: block ends, usage, finish.

        Raises:
            ProviderConnectionError: the stream ended with neither ``[DONE]`` nor a finish
                reason, or (``expect_usage``) after the finish reason without usage or ``[DONE]``.
            ProviderStreamError: ``MALFORMED_RESPONSE``: a tool call was never named, or
                the stream ended at ``[DONE]`` without a finish reason.
        """
        if self._finish is None:
            if not self.done:
                raise _truncated("before it was complete")
            # Read as a stop, an answer the token limit cut, or a stream of nothing,
            # would pass for a whole one.
            raise malformed("chat completions: the stream ended at [DONE] without a finish reason")
        if not self.done and self.expect_usage and not self.sent_usage:
            raise _truncated("after its finish reason, before the usage this server sends")
        unnamed = self._table.unnamed_call()
        if unnamed is not None:
            # No server sends a call without a name: one was lost, or given at another index.
            raise malformed(f"chat completions: {unnamed} was never named")
        out: list[StreamChunk] = list(self._table.end_all())
        if self._table.usage is not None:
            out.append(UsageChunk(self._table.usage))
        out.append(Finish(chat_finish(self._finish)))
        return out
