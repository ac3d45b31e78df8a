"""Mock server values: the parsed call, neutral replies, raw replies, faults and timing."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from typing import Literal, TypeAlias, final

import attrs

__all__ = [
    "Delay",
    "Endless",
    "Fault",
    "FaultKind",
    "MockCall",
    "MockReply",
    "MockResponse",
    "MockToolCall",
    "RawReply",
    "Timing",
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
Delay: TypeAlias = float | Callable[[random.Random], float]
"""Seconds, fixed or drawn from a distribution (a function of the server's RNG)."""

JsonObject = dict[str, object]


@final
@attrs.frozen
class MockCall:
    """One request the mock server received, parsed enough for a policy to answer it."""

    api: Api
    """Which wire format: ``chat``, ``responses`` or ``messages`` (Anthropic)."""
    body: Mapping[str, object]
    """The JSON request body."""
    headers: Mapping[str, str]
    """Request headers, lower-cased names."""
    number: int
    """The request's position in the server's lifetime (0-based)."""

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
        """The offered tools as ``(name, JSON schema)`` pairs, in every wire format."""
        found = []
        tools = self.body.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if not isinstance(tool, dict):
                continue
            spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            assert isinstance(spec, dict)
            schema = spec.get("parameters", spec.get("input_schema", {}))
            found.append((str(spec.get("name", "")), schema if isinstance(schema, dict) else {}))
        return tuple(found)

    @property
    def after_tool_results(self) -> bool:
        """Whether the last message carries tool results."""
        last = self._last_item()
        if self.api == "chat":
            return last.get("role") == "tool"
        if self.api == "responses":
            return last.get("type") == "function_call_output"
        content = last.get("content")
        return isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content
        )

    @property
    def last_text(self) -> str:
        """The text of the last message (tool results included as text)."""
        last = self._last_item()
        return _text_of(last.get("content", last.get("output", "")))

    @property
    def input_tokens(self) -> int:
        """A rough input token count: a quarter of the body's JSON length."""
        return max(1, len(json.dumps(self.body)) // 4)

    def _last_item(self) -> JsonObject:
        items = self.body.get("input" if self.api == "responses" else "messages")
        if isinstance(items, str):
            return {"role": "user", "content": items}
        if isinstance(items, list) and items and isinstance(items[-1], dict):
            return items[-1]
        return {}


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
    """A tool call the mock model makes; ``arguments`` is raw JSON text."""

    name: str
    arguments: str
    id: str | None = None


@final
@attrs.frozen
class MockReply:
    """A neutral model reply, rendered in whichever wire format was asked for.

    ``chunks`` is how many pieces the text is streamed in (arguments and
    reasoning get a few pieces each). ``finish`` is ``stop``, ``tool_calls`` or
    ``length``; by default it is ``tool_calls`` when there are calls.
    """

    text: str = ""
    tool_calls: tuple[MockToolCall, ...] = ()
    reasoning: str = ""
    finish: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    chunks: int = 4

    @property
    def finish_name(self) -> str:
        """The finish reason name, defaulted."""
        if self.finish is not None:
            return self.finish
        return "tool_calls" if self.tool_calls else "stop"


@final
@attrs.frozen
class RawReply:
    """A verbatim HTTP response (a recorded exchange): served byte for byte."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @classmethod
    def from_fixture(cls, exchange: Mapping[str, object]) -> RawReply:
        """Build from a recorded-exchange JSON object (``response.status/headers/body``)."""
        response = exchange["response"]
        assert isinstance(response, dict)
        headers = response.get("headers") or {}
        assert isinstance(headers, dict)
        return cls(
            int(response["status"]),
            tuple((str(k), str(v)) for k, v in headers.items()),
            str(response["body"]).encode("utf-8"),
        )


@final
@attrs.frozen
class Fault:
    """An injected failure of a given kind.

    ``retry_after`` (seconds) goes into ``Retry-After`` and ``retry-after-ms``
    of 429/529 responses. Stream faults (``stream_error``, ``truncated``,
    ``malformed``, ``stall``) start a normal 200 stream of ``reply`` first.
    """

    kind: FaultKind
    retry_after: float | None = 1.0
    reply: MockReply = MockReply(text="partial answer that will not finish", chunks=4)


@final
@attrs.frozen
class Endless:
    """A 200 stream that never ends: a text delta every ``interval`` seconds."""

    interval: float = 0.05


MockResponse: TypeAlias = MockReply | RawReply | Fault | Endless


@final
@attrs.frozen
class Timing:
    """Delays the server adds: before the headers, before the first event, between events."""

    latency: Delay = 0.0
    first_token: Delay = 0.0
    inter_chunk: Delay = 0.0

    @staticmethod
    def draw(delay: Delay, rng: random.Random) -> float:
        """The seconds *delay* stands for, drawn now."""
        return max(0.0, delay(rng) if callable(delay) else float(delay))
