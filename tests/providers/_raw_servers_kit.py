"""Raw TCP servers that misbehave at one stage of a request, and a managed call's charge.

Each server serves every connection with a handler of ``(stream, seen)``; ``seen``
lists the request bodies read whole, which is what a provider could have counted.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager

import attrs
import trio

from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ManagedModel,
    ProviderError,
    RetryPolicy,
    manage,
)
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel

from .support import make_request

Handler = Callable[[trio.SocketStream, list[bytes]], Awaitable[None]]

BIG_TEXT = "x" * 8_000_000
"""A prompt no socket buffer takes whole: its request is written only as it is read."""


async def read_request(stream: trio.SocketStream) -> bytes | None:
    """The body of one HTTP/1.1 request read whole (by its length), or ``None`` at its end."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = await stream.receive_some(65536)
        if not part:
            return None
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        part = await stream.receive_some(65536)
        if not part:
            return None
        body += part
    return body


async def read_then_hang(stream: trio.SocketStream, seen: list[bytes]) -> None:
    """Read the request whole and never answer."""
    body = await read_request(stream)
    if body is not None:
        seen.append(body)
    await trio.sleep_forever()


async def never_read(_stream: trio.SocketStream, _seen: list[bytes]) -> None:
    """Take the connection and read nothing of it."""
    await trio.sleep_forever()


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[str, list[bytes]]]:
    """The base URL of a server serving each connection with *handler*, and its ``seen``."""
    seen: list[bytes] = []

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            await handler(stream, seen)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}", seen
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def silent_listener() -> AsyncIterator[str]:
    """``host:port`` of a socket whose connections the kernel makes and nothing reads."""
    listener = trio.socket.socket()
    with listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        host, port = listener.getsockname()
        yield f"{host}:{port}"


def adapter(api: str, base_url: str, **options: object) -> OpenAIModel | AnthropicModel:
    """An adapter of *api* (``chat`` or ``messages``) for the server at *base_url*."""
    if api == "messages":
        return AnthropicModel(base_url=base_url, api_key="k", **options)  # type: ignore[arg-type]
    return OpenAIModel(base_url=f"{base_url}/v1", api_key="k", **options)  # type: ignore[arg-type]


@attrs.frozen
class Charged:
    """How one managed call ended, and the requests its lane counts after it."""

    error: ProviderError | None
    cancelled: bool
    requests: int


def managed_once(model: OpenAIModel | AnthropicModel) -> tuple[ManagedModel, AdmissionController]:
    """*model* managed with one attempt, under a lane counting requests."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=100))
    return manage(model, retry=RetryPolicy(max_attempts=1), admission=admission), admission


async def call_charged(
    model: OpenAIModel | AnthropicModel,
    *,
    text: str = "hello",
    cancel_after: float = 30.0,
    session_id: str = "s",
) -> Charged:
    """One managed call of *model*, cancelled after *cancel_after* seconds if not done."""
    managed, admission = managed_once(model)
    error: ProviderError | None = None
    with trio.move_on_after(cancel_after) as scope:
        try:
            request = make_request(text, session_id=session_id)
            async with aclosing(managed.stream(request)) as chunks:
                async for _ in chunks:
                    pass
        except ProviderError as exc:
            error = exc
    lanes = admission.statistics().lanes
    return Charged(error, scope.cancelled_caught, lanes[0].requests_in_window if lanes else 0)
