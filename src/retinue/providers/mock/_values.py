"""Mock server values: the parsed call, neutral replies, raw replies and faults."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias, final

import attrs

from retinue._checks import needs_an_instance
from retinue.session._history import ENVELOPE_TAGS

from ._asks import ToolChoice, output_limit, parallel_calls, tool_choice
from ._fields import (
    check_chunks,
    check_optional_str,
    check_pause,
    check_status,
    check_str,
    check_token_count,
    header_pairs,
    instances,
)
from ._timing import Endless, Timing

__all__ = [
    "Fault",
    "FaultKind",
    "MockCall",
    "MockReply",
    "MockResponse",
    "MockToolCall",
    "RawReply",
    "check_server_options",
]

Api: TypeAlias = Literal["chat", "responses", "messages"]
FaultKind: TypeAlias = Literal[
    "rate_limit", "server_error", "overloaded", "stream_error", "truncated", "malformed", "stall"
]
FAULT_KINDS: tuple[FaultKind, ...] = (
    "rate_limit",
    "server_error",
    "overloaded",
    "stream_error",
    "truncated",
    "malformed",
    "stall",
)
JsonObject = dict[str, object]


def _body_key(call: MockCall) -> str:
    try:
        canonical = json.dumps(call.body, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):  # a hand-built body that is not JSON
        canonical = repr(call.body)
    return hashlib.sha256(f"{call.api}\n{canonical}".encode()).hexdigest()


@final
@attrs.frozen
class MockCall:
    """One request the mock server received, parsed enough for a policy to answer it.

    Randomness should come from :meth:`rng`, not from :attr:`number`:
    concurrent clients reach the server in an order trio randomises, while
    a request's body (its :attr:`key`) and :attr:`occurrence` do not change
    from run to run.
    """

    api: Api
    """Which wire format: ``chat``, ``responses`` or ``messages`` (Anthropic)."""
    body: Mapping[str, object]
    """The JSON request body."""
    headers: Mapping[str, str]
    """Request headers, lower-cased names."""
    number: int
    """The request's position in the server's lifetime (0-based); arrival order."""
    key: str = attrs.field(default=attrs.Factory(_body_key, takes_self=True), kw_only=True)
    """A digest of the API and the JSON body: equal for equal requests."""
    occurrence: int = attrs.field(default=0, kw_only=True)
    """How many earlier calls with the same :attr:`key` the server received."""

    def rng(self, seed: int, purpose: str) -> random.Random:
        """A generator for this call's draws, independent of arrival order.

        Its state depends only on *seed*, *purpose*, :attr:`key` and
        :attr:`occurrence`, so a retry (the same body again) draws afresh and
        a run with the same seed and the same requests draws the same values.
        Two clients that send identical bodies at the same time may swap
        their draws: nothing in the requests tells them apart.
        """
        return random.Random(f"{seed}/{purpose}/{self.key}/{self.occurrence}")

    @property
    def stream(self) -> bool:
        """Whether a streaming response was asked for."""
        return bool(self.body.get("stream"))

    @property
    def model(self) -> str:
        """The requested model."""
        return str(self.body.get("model", ""))

    @property
    def include_usage(self) -> bool:
        """Whether a Chat Completions stream should end with a usage chunk."""
        options = self.body.get("stream_options")
        return isinstance(options, dict) and bool(options.get("include_usage"))

    @property
    def tools(self) -> tuple[tuple[str, JsonObject], ...]:
        """The offered client function tools as ``(name, JSON schema)`` pairs, in every wire format.

        Built-in and server tools (``web_search`` and the like) are left out:
        the provider runs those, so a model never calls them as functions.
        """
        tools = self.body.get("tools")
        offered = tools if isinstance(tools, list) else ()
        return tuple(
            function
            for tool in offered
            if (function := _client_function(self.api, tool)) is not None
        )

    @property
    def tool_choice(self) -> ToolChoice:
        """How the request lets the reply call tools (``auto``, ``none`` or ``required``)
        and the names it may call (``None``: any offered), in every wire format."""
        return tool_choice(self.api, self.body)

    @property
    def parallel_tool_calls(self) -> bool:
        """Whether the request lets the reply call several tools at once."""
        return parallel_calls(self.api, self.body)

    @property
    def max_output_tokens(self) -> int | None:
        """The most output tokens the request allows, if it says."""
        return output_limit(self.api, self.body)

    @property
    def tool_results(self) -> tuple[str, ...]:
        """The text of each tool result sent since the last assistant turn, in order.

        Any later message (a ``<context>`` note or a prompt after the results,
        say) is not a tool result, but does not hide them either.
        """
        return tuple(
            text
            for item in self._since_last_assistant_turn()
            for is_result, text in _parts(self.api, item)
            if is_result
        )

    @property
    def after_tool_results(self) -> bool:
        """Whether the input since the last assistant turn ends in tool results.

        Context or steering envelopes after them do not count; a prompt after
        them (the next one, after a turn cut short in its tools) is new input.
        """
        later: list[str] | None = None  # the text sent after the last tool result
        for item in self._since_last_assistant_turn():
            for is_result, text in _parts(self.api, item):
                if is_result:
                    later = []
                elif later is not None:
                    later.append(text)
        # A part with no text (an image, say) is no envelope: new input as a prompt is.
        return later is not None and all(later) and _ENVELOPES.fullmatch("".join(later)) is not None

    @property
    def last_text(self) -> str:
        """The text of the last message (tool results included as text).

        Of a message of several parts (an Anthropic user message holding tool
        results, context and a prompt): the text after its last tool result,
        else that result's, and of that the text after the context and steering
        it opens with, if any, as the other formats send each as a message.
        """
        items = self._items()
        last = items[-1] if items and isinstance(items[-1], dict) else {}
        result = ""
        texts: list[str] = []
        for is_result, text in _parts(self.api, last):
            if is_result:
                result, texts = text, []
            else:
                texts.append(text)
        if not texts:
            return result
        joined = "".join(texts)
        # Context the adapter put in the one message before the prompt: the prompt alone.
        return joined[_envelopes_end(joined) :] or joined

    @property
    def input_tokens(self) -> int:
        """A rough input token count: a quarter of the body's JSON length."""
        return max(1, len(json.dumps(self.body)) // 4)

    def _items(self) -> list[object]:
        """The conversation: messages, or Responses input items."""
        items = self.body.get("input" if self.api == "responses" else "messages")
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        return items if isinstance(items, list) else []

    def _since_last_assistant_turn(self) -> list[JsonObject]:
        # From the end back: a long history's earlier turns are never read.
        since: list[JsonObject] = []
        for item in reversed(self._items()):
            if isinstance(item, dict):
                if _is_assistant_turn(item):
                    break
                since.append(item)
        since.reverse()
        return since


_ASSISTANT_ITEMS = ("function_call", "reasoning")
"""Responses input items the model produced, besides messages with the assistant role.

A tuple: its ``in`` compares, where a set would hash, and an item's ``type``
may be an object or a list.
"""


def _is_assistant_turn(item: JsonObject) -> bool:
    return item.get("role") == "assistant" or item.get("type") in _ASSISTANT_ITEMS


def _parts(api: Api, item: JsonObject) -> list[tuple[bool, str]]:
    """*item*'s parts in order, each as (whether it is a tool result, its text)."""
    if api == "chat":
        return [(item.get("role") == "tool", _text_of(item.get("content", "")))]
    if api == "responses":
        if item.get("type") == "function_call_output":
            return [(True, _text_of(item.get("output", "")))]
        return [(False, _text_of(item.get("content", "")))]
    blocks = item.get("content")
    if not isinstance(blocks, list):
        return [(False, _text_of(blocks))]
    return [
        (isinstance(block, dict) and block.get("type") == "tool_result", _text_of(block))
        for block in blocks
    ]


# Context or steering as the runtime wraps it. Its body cannot run past its closing tag,
# so a text has one way to match a run of them: a failed match costs a pass, not one
# per way to split the run.
_ENVELOPE = rf"\s*<(?P<tag>{'|'.join(ENVELOPE_TAGS)}) source=[^>]*>(?:(?!</(?P=tag)>).)*</(?P=tag)>"
_ENVELOPES = re.compile(rf"(?:{_ENVELOPE})*\s*", re.DOTALL)


def _envelopes_end(text: str) -> int:
    """Where the context and steering envelopes *text* opens with end."""
    opening = _ENVELOPES.match(text)
    return 0 if opening is None else opening.end()


def _client_function(api: Api, tool: object) -> tuple[str, JsonObject] | None:
    """*tool*'s name and parameter schema if the client runs it as a function, else ``None``."""
    if not isinstance(tool, dict):
        return None
    if api == "messages":
        # A tool the client defines has an input schema and no type, or the type "custom";
        # a typed one (web_search_20250305, bash_20250124, ...) is Anthropic's own.
        schema = tool.get("input_schema")
        if tool.get("type", "custom") != "custom" or not isinstance(schema, dict):
            return None
        return str(tool.get("name", "")), schema
    if tool.get("type") != "function":
        return None
    spec = tool.get("function") if api == "chat" else tool
    if not isinstance(spec, dict):
        return None
    schema = spec.get("parameters")
    return str(spec.get("name", "")), schema if isinstance(schema, dict) else {}


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "content", "output"):
            if key in content:
                return _text_of(content[key])
    return ""


@final
@attrs.frozen
class MockToolCall:
    """A tool call the mock model makes; ``arguments`` is raw JSON text.

    Raises:
        TypeError: *name* or *arguments* is no ``str``, or *id* neither ``None`` nor one.
    """

    name: str = attrs.field(validator=check_str)
    arguments: str = attrs.field(validator=check_str)
    id: str | None = attrs.field(default=None, validator=check_optional_str)


def _calls(calls: Iterable[MockToolCall]) -> tuple[MockToolCall, ...]:
    """A reply's calls as a tuple, however given: the reply stays hashable and unchanged."""
    return instances(calls, MockToolCall, "MockReply.tool_calls", "MockToolCalls")


@final
@attrs.frozen
class MockReply:
    """A neutral model reply, rendered in whichever wire format was asked for.

    ``chunks`` is how many pieces the text is streamed in (arguments and
    reasoning get a few pieces each). ``finish`` is ``stop``, ``tool_calls`` or
    ``length``; by default it is ``tool_calls`` when there are calls.

    Raises:
        TypeError, ValueError: a field is of another type, a token count is
            negative or ``chunks`` is below 1; the message names the field.
    """

    text: str = attrs.field(default="", validator=check_str)
    tool_calls: tuple[MockToolCall, ...] = attrs.field(default=(), converter=_calls)
    reasoning: str = attrs.field(default="", validator=check_str)
    finish: str | None = attrs.field(default=None, validator=check_optional_str)
    input_tokens: int | None = attrs.field(default=None, validator=check_token_count)
    output_tokens: int | None = attrs.field(default=None, validator=check_token_count)
    chunks: int = attrs.field(default=4, validator=check_chunks)

    @property
    def finish_name(self) -> str:
        """The finish reason name, defaulted."""
        if self.finish is not None:
            return self.finish
        return "tool_calls" if self.tool_calls else "stop"


_FRAMING = frozenset({"content-length", "transfer-encoding"})
"""Headers the server sets itself, framing the body anew for the connection it is sent on."""


def _unframed(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    pairs = header_pairs(headers, "RawReply.headers")
    return tuple((name, value) for name, value in pairs if name.lower() not in _FRAMING)


def _bytes(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bytes):
        raise TypeError(f"RawReply.body must be bytes, not {type(value).__name__} {value!r:.60}")


@final
@attrs.frozen
class RawReply:
    """A verbatim HTTP response (a recorded exchange): the body is served byte for byte.

    ``headers`` are ``(name, value)`` pairs of str, in order and repeatable as
    on the wire, not a mapping. ``content-length`` and ``transfer-encoding``
    are dropped from them:
    the server frames the body itself. ``content-encoding`` is kept, as it
    describes the body bytes (a body that claims an encoding it does not have
    tests a client's handling of a broken proxy).

    Raises:
        TypeError, ValueError: *status* is no HTTP status (an int from 100 to
            599), *headers* no ``(name, value)`` pairs of str or one no HTTP
            response can carry (a line break in its value, say), or *body* no bytes.
    """

    status: int = attrs.field(validator=check_status)
    headers: tuple[tuple[str, str], ...] = attrs.field(converter=_unframed)
    body: bytes = attrs.field(validator=_bytes)

    @classmethod
    def from_fixture(cls, exchange: Mapping[str, object]) -> RawReply:
        """Build from a recorded-exchange JSON object (``response.status/headers/body``).

        Raises:
            ValueError: the exchange has no ``response`` object, or its ``status``
                is no HTTP status, its ``headers`` no object of strings or its
                ``body`` no string (the text as recorded: a body stored parsed
                would be served as other bytes); the message names the field.
                A header no HTTP response can carry is refused as :class:`RawReply` refuses it.
        """
        response = exchange.get("response")
        if not isinstance(response, Mapping):
            raise _not_replayable("response", "an object", response)
        status = response.get("status")
        if type(status) is not int or not 100 <= status <= 599:
            raise _not_replayable("response.status", "an HTTP status from 100 to 599", status)
        headers = response.get("headers") or {}
        if not isinstance(headers, Mapping):
            raise _not_replayable("response.headers", "an object of strings", headers)
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise _not_replayable(f"response.headers[{name!r}]", "a string", value)
        body = response.get("body")
        if not isinstance(body, str):
            raise _not_replayable("response.body", "the response text, a string", body)
        return cls(status, tuple(headers.items()), body.encode("utf-8"))


def _not_replayable(field: str, expected: str, value: object) -> ValueError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ValueError(f"the recorded exchange's {field} must be {expected}, not {shown}")


def check_fault_kind(kind: object) -> None:
    """Raise ``ValueError`` unless *kind* is one of :data:`FAULT_KINDS`.

    A misspelt kind would otherwise inject some other fault without a word.
    """
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; the kinds are {', '.join(FAULT_KINDS)}")


def _valid_kind(_instance: object, _attribute: object, kind: object) -> None:
    check_fault_kind(kind)


@final
@attrs.frozen
class Fault:
    """An injected failure of a given kind.

    ``retry_after`` (seconds) goes into ``Retry-After`` and ``retry-after-ms``
    of 429/529 responses. Stream faults (``stream_error``, ``truncated``,
    ``malformed``, ``stall``) start a normal 200 stream of ``reply`` first.
    A kind not in :data:`FAULT_KINDS` is refused with ``ValueError``, and so is
    a ``retry_after`` that is no finite number of seconds >= 0 (or ``None``).
    """

    kind: FaultKind = attrs.field(validator=_valid_kind)
    retry_after: float | None = attrs.field(default=1.0, validator=check_pause)
    reply: MockReply = attrs.field(
        default=MockReply(text="partial answer that will not finish", chunks=4),
        validator=attrs.validators.instance_of(MockReply),
    )


MockResponse: TypeAlias = MockReply | RawReply | Fault | Endless


def check_server_options(policy: object, timing: object, max_calls: object) -> None:
    """Refuse a :class:`MockServer`'s options when built, naming the one at fault.

    A policy that cannot be called would fail every request with a 500.

    Raises:
        TypeError: *policy* is not callable (or is a policy class, not one built),
            *timing* no ``Timing``, *max_calls*
            neither ``None`` nor an int.
        ValueError: *max_calls* is negative.
    """
    if policy is not None and (not callable(policy) or needs_an_instance(policy, "__call__")):
        raise TypeError(f"MockServer policy must be callable with a MockCall, not {policy!r}")
    if timing is not None and not isinstance(timing, Timing):
        raise TypeError(f"MockServer timing must be a Timing, not {timing!r}")
    if max_calls is not None and type(max_calls) is not int:
        raise TypeError(f"MockServer max_calls must be an int or None, not {max_calls!r}")
    if max_calls is not None and max_calls < 0:
        raise ValueError(f"MockServer max_calls must be at least 0, not {max_calls!r}")
