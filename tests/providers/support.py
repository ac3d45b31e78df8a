"""Shared helpers for provider tests: fixtures, requests, chunk collection, fake models."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio

from retinue._content import Message, OpaqueBlock, Text
from retinue._lossless import freeze_json
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest, ToolSchema
from retinue._stream import StreamChunk
from retinue.loop._assembler import BlockAssembler
from retinue.providers import (
    AdmissionController,
    LaneStatistics,
    ProviderError,
    RetryPolicy,
    manage,
)
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel

# Each API's own image block, so that a body is what the adapter would really send.
ANTHROPIC_IMAGE = OpaqueBlock(
    "image", freeze_json({"source": {"type": "base64", "media_type": "image/png", "data": "iV"}})
)
CHAT_IMAGE = OpaqueBlock(
    "image_url", freeze_json({"image_url": {"url": "data:image/png;base64,iV"}})
)
RESPONSES_IMAGE = OpaqueBlock("input_image", freeze_json({"image_url": "data:image/png;base64,iV"}))

FIXTURES = Path(__file__).parent / "fixtures"
ALL_FIXTURES = sorted(FIXTURES.glob("*/*.json"))

WEATHER = ToolSchema(
    "lookup",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def load(name: str) -> dict[str, Any]:
    """Load a recorded exchange by file name."""
    found = [path for path in ALL_FIXTURES if path.name == name]
    assert found, name
    return json.loads(found[0].read_text(encoding="utf-8"))


def recorded_events(name: str) -> list[dict[str, Any]]:
    """The ``data:`` events of the recorded streamed exchange *name*, in order."""
    body: str = load(name)["response"]["body"]
    return [
        json.loads(line.removeprefix("data: "))
        for line in body.splitlines()
        if line.startswith("data: ")
    ]


def completed_text(events: list[dict[str, Any]]) -> str:
    """The text of the first part of the first item a Responses stream completes."""
    done = next(e for e in events if e["type"] == "response.output_item.done")
    text: str = done["item"]["content"][0]["text"]
    return text


def make_request(
    *messages: Message | str,
    model: str = "test-model",
    provider: str | None = None,
    system: str | None = None,
    tools: Sequence[ToolSchema] = (),
    session_id: str | None = "session-1",
    max_tokens: int | None = None,
    temperature: float | None = None,
    stop: list[str] | tuple[str, ...] | None = None,
) -> ModelRequest:
    """A model request over *messages* (strings become user messages)."""
    history = [Message("user", (Text(m),)) if isinstance(m, str) else m for m in messages]
    config = LlmCallConfig(model, provider, temperature, max_tokens, stop)
    return ModelRequest(config, MessageHistory(history), system, tuple(tools), session_id)


@attrs.define
class Collected:
    """Every chunk of one stream and their assembly."""

    chunks: list[StreamChunk]
    assembler: BlockAssembler

    @property
    def message(self) -> Message:
        return self.assembler.message()


async def collect(model: Any, request: ModelRequest) -> Collected:
    """Stream *request* to the end."""
    assembler = BlockAssembler()
    chunks: list[StreamChunk] = []
    async with aclosing(model.stream(request)) as stream:
        async for chunk in stream:
            chunks.append(chunk)
            assembler.feed(chunk)
    return Collected(chunks, assembler)


@attrs.define
class FakeModel:
    """A model whose attempts are scripted: each is a list of chunks or an exception.

    An attempt may also be a callable returning such a script step. Records
    when each attempt started (trio time).
    """

    attempts: list[Any]
    provider: str = "fake"
    started: list[float] = attrs.field(factory=list)
    delay: float = 0.0

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.started.append(trio.current_time())
        step = self.attempts.pop(0)
        if isinstance(step, Callable):  # type: ignore[arg-type]
            step = step()
        if self.delay:
            await trio.sleep(self.delay)
        if isinstance(step, BaseException):
            raise step
        for item in step:
            await trio.lowlevel.checkpoint()
            if isinstance(item, BaseException):
                raise item
            yield item


SSE = (("content-type", "text/event-stream"),)
JSON = (("content-type", "application/json"),)


def _adapter(api: str, base_url: str, **options: Any) -> OpenAIModel | AnthropicModel:
    """The adapter for *api* (``messages``, ``chat`` or ``responses``) at *base_url*."""
    if api == "messages":
        return AnthropicModel(base_url=base_url, api_key="k", **options)
    return OpenAIModel(base_url=f"{base_url}/v1", api_key="k", api=api, **options)  # type: ignore[arg-type]


def mock_adapter(api: str, server: MockServer) -> OpenAIModel | AnthropicModel:
    """The adapter for *api* over *server*'s in-process transport."""
    return _adapter(api, "http://mock", transport=server.transport())


def served_by(api: str, server: MockServer, **options: Any) -> OpenAIModel | AnthropicModel:
    """The adapter for *api*, built with *options*, talking to *server* over a socket.

    The in-process transport decodes a whole body when it builds the response,
    before the adapter reads it; a socket lets the adapter read it as it arrives.
    """
    return _adapter(api, server.base_url, **options)


async def serve_once(api: str, body: bytes, headers: Any = SSE) -> Collected:
    """Stream one request of *api* against a server answering *body* once."""
    server = MockServer(ScriptedPolicy([RawReply(200, headers, body)]))
    with trio.fail_after(5):
        async with mock_adapter(api, server) as model:
            return await collect(model, make_request("hi"))


def sse_body(*payloads: bytes) -> bytes:
    """An SSE body of one ``data:`` event per payload."""
    return b"".join(b"data: " + payload + b"\n\n" for payload in payloads)


@attrs.frozen
class Sent:
    """One request of :func:`one_after_another`: when it ended, its error, its lane then."""

    ended: float
    error: ProviderError | None
    lanes: tuple[LaneStatistics, ...]


async def one_after_another(
    server: MockServer,
    *,
    api: str = "chat",
    retry: RetryPolicy | None = None,
    admission: AdmissionController | None = None,
    deadline: float = 10_000.0,
) -> list[Sent]:
    """Two requests of two sessions, one after the other, through one managed lane.

    The second shows what the first's answer left of the lane: a pause, or none.
    Each is reported with the virtual time it ended at, its ``ProviderError``
    (``None`` when it streamed) and the lanes' statistics right after it.
    """
    admission = admission or AdmissionController()
    sent: list[Sent] = []
    async with mock_adapter(api, server) as adapter:
        model = manage(adapter, retry=retry or RetryPolicy(), admission=admission)
        with trio.fail_after(deadline):
            for session in ("first", "second"):
                error: ProviderError | None = None
                try:
                    await collect(model, make_request("hi", session_id=session))
                except ProviderError as exc:
                    error = exc
                lanes = tuple(admission.statistics().lanes)
                sent.append(Sent(trio.current_time(), error, lanes))
    return sent


class PartsBody(httpx2.AsyncByteStream):
    """A body that arrives in the given parts, each a read of its own."""

    def __init__(self, *parts: bytes) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            await trio.lowlevel.checkpoint()
            yield part


class BrokenErrorBody(httpx2.AsyncByteStream):
    """An error response's body that breaks with *failure* after its first bytes, or, with
    ``None``, never arrives whole."""

    def __init__(self, failure: Exception | None) -> None:
        self.failure = failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"error":{"mess'
        if self.failure is None:
            await trio.sleep_forever()
        raise self.failure
