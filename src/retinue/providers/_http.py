"""HTTP plumbing shared by the adapters: sharded connection pools and SSE stream pumping."""

from __future__ import annotations

import functools
import math
import ssl
import zlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from types import TracebackType
from typing import Protocol, Self, final

import httpx2
import trio
from httpx2._transports.default import map_httpcore_exceptions

from retinue._stream import StreamChunk

from ._blocks import loads_event
from ._failures import ProviderConnectionError, ProviderError, ProviderStreamError, status_error
from ._sse import SseDecoder, SseEvent

__all__ = [
    "SHARD_HEADER",
    "ShardedTransport",
    "StreamDecoder",
    "check_http_settings",
    "close_response",
    "connection_failed",
    "decode_response",
    "make_http_client",
    "post_encodable",
    "send_within",
]

DRAIN_SECONDS = 1.0
"""How long to wait for the end of a body after its terminal event."""

CLOSE_SECONDS = 1.0
"""How long closing an adapter may hold off a cancellation."""

SHARD_HEADER = "x-retinue-shard"
"""Request header naming the pool shard (the session id); removed before sending."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for every pool (building one costs tens of milliseconds)."""
    return httpx2.create_ssl_context()


@final
class _ClosingStream(httpx2.AsyncByteStream):
    """A response body that closes the pool's body iterator when abandoned.

    httpx2's transport stream leaves the connection pool's async generator to
    the garbage collector when iteration stops early (an aborted stream); under
    trio that is a ResourceWarning. This iterates the pool stream directly and
    closes it. Closing it also gives its connection back to *release*.
    """

    def __init__(self, outer: httpx2.AsyncByteStream, release: Callable[[], None]) -> None:
        self._outer = outer
        source = getattr(outer, "_httpcore_stream", None)
        self._source: AsyncIterable[bytes] = source if source is not None else outer
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        iterator = self._source.__aiter__()
        try:
            with map_httpcore_exceptions():
                async for part in iterator:
                    yield part
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    async def aclose(self) -> None:
        release, self._release = self._release, None
        try:
            await self._outer.aclose()
        finally:
            if release is not None:
                release()


def _pool_sizes(connections: int, shards: int) -> list[int]:
    """*connections* split over *shards* pools as evenly as they go (sizes differ by one at most)."""
    size, extra = divmod(connections, shards)
    return [size + 1 if index < extra else size for index in range(shards)]


@final
class ShardedTransport(httpx2.AsyncBaseTransport):
    """Several connection pools behind one transport, ``max_connections`` in total.

    Many small pools cost less CPU per request than one large one (a pool's
    bookkeeping scans all its connections on each request). A request goes to
    the pool its shard header (the session id) hashes to, so a session's
    connections stay warm; when that pool is full it takes the pool with the
    most free connections, so any mix of sessions can use every connection.
    A request without a shard header takes the pools in turn.
    """

    def __init__(
        self,
        shards: int,
        pool_size: int,
        *,
        max_connections: int | None = None,
        keepalive_expiry: float = 30.0,
    ) -> None:
        shards = max(1, shards)
        total = shards * pool_size if max_connections is None else max_connections
        if total < shards:
            raise ValueError(f"max_connections ({total}) must be at least the pools ({shards})")
        context = _ssl_context()
        self._free = _pool_sizes(total, shards)
        self._pools = [
            httpx2.AsyncHTTPTransport(
                verify=context,
                limits=httpx2.Limits(
                    max_connections=size,
                    max_keepalive_connections=size,
                    keepalive_expiry=keepalive_expiry,
                ),
            )
            for size in self._free
        ]
        self._slots = trio.Semaphore(total)
        self._turn = 0
        self.max_connections = total
        """Connections in total, over all pools."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send *request* through the pool its shard header selects, or one with room."""
        key = request.headers.get(SHARD_HEADER)
        if key is None:
            self._turn = preferred = (self._turn + 1) % len(self._pools)
        else:
            del request.headers[SHARD_HEADER]
            preferred = zlib.crc32(key.encode()) % len(self._pools)
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            await self._wait_for_slot()
        index = self._take(preferred)
        release = functools.partial(self._release, index)
        try:
            response = await self._pools[index].handle_async_request(request)
        except BaseException:
            release()
            raise
        stream = response.stream
        if isinstance(stream, httpx2.AsyncByteStream):
            response.stream = _ClosingStream(stream, release)
        else:  # pragma: no cover - httpx2's transport always streams
            release()
        return response

    def _take(self, preferred: int) -> int:
        """Take a free connection's place in a pool (a slot is held); returns the pool's index."""
        free = self._free
        # The pool sizes sum to the slots, so with a slot held some pool has room.
        index = preferred if free[preferred] > 0 else free.index(max(free))
        free[index] -= 1
        return index

    async def _wait_for_slot(self) -> None:
        """Wait for a connection to be released, saying so to :func:`send_within`.

        The mark stays when the wait is cancelled: a deadline that ends it
        reports the wait, not a silent server.
        """
        answer = _answer.get()
        if answer is not None:
            answer.waiting_for = self.max_connections
        await self._slots.acquire()
        if answer is not None:
            answer.waiting_for = None

    def _release(self, index: int) -> None:
        self._free[index] += 1
        self._slots.release()

    async def aclose(self) -> None:
        """Close every pool; always a checkpoint."""
        await trio.lowlevel.checkpoint()
        for pool in self._pools:
            await pool.aclose()

    @property
    def shards(self) -> int:
        """How many pools there are."""
        return len(self._pools)


@final
class _ShardHeaderStripper(httpx2.AsyncBaseTransport):
    """A caller's transport, minus the shard header.

    Only :class:`ShardedTransport` reads (and removes) the header; any other
    transport would send the session id upstream.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send *request* through the wrapped transport without the shard header."""
        if SHARD_HEADER in request.headers:
            del request.headers[SHARD_HEADER]
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self._inner.aclose()


def check_http_settings(
    *, max_connections: int, pool_size: int, timeout: float, connect_timeout: float
) -> None:
    """Refuse connection settings no request could work with, when the adapter is built.

    A zero count would leave every request waiting for a connection that never
    comes; a negative or NaN timeout would fail every request.

    Raises:
        ValueError: naming the setting and its value.
    """
    _check_count("max_connections", max_connections)
    _check_count("pool_size", pool_size)
    _check_seconds("timeout", timeout)
    _check_seconds("connect_timeout", connect_timeout)


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


def _check_seconds(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a positive, finite number of seconds, not {value!r}")


def make_http_client(
    *,
    max_connections: int,
    pool_size: int,
    timeout: float,
    connect_timeout: float,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` over ``ceil(max_connections / pool_size)`` sharded pools.

    It follows redirects, as the SDKs' own clients do. A given *transport*
    replaces the pools; the shard header never reaches it.
    """
    if transport is None:
        shards = -(-max_connections // pool_size)
        transport = ShardedTransport(shards, pool_size, max_connections=max_connections)
    elif not isinstance(transport, ShardedTransport):
        transport = _ShardHeaderStripper(transport)
    return httpx2.AsyncClient(
        transport=transport,
        timeout=httpx2.Timeout(timeout, connect=connect_timeout, pool=None),
        follow_redirects=True,
        event_hooks={"response": [_note_answer]},
    )


def _cause(exc: BaseException) -> str:
    """What made an SDK's connection error: the transport's error and, under it, the OS's.

    A refused connection is an exception group of one failure per address
    tried; its members say more than the group does.
    """
    found = exc.__cause__
    if found is None:
        return str(exc)
    reason = f"{type(found).__name__}: {found}" if str(found) else type(found).__name__
    while found is not None:
        if isinstance(found, BaseExceptionGroup):
            return f"{reason} ({'; '.join(str(inner) for inner in found.exceptions)})"
        found = found.__cause__ or found.__context__
    return reason


def connection_failed(exc: Exception, provider: str, *, timed_out: bool) -> ProviderConnectionError:
    """The typed error for an SDK's connection failure: where it was going and why it failed."""
    request = getattr(exc, "request", None)
    where = ""
    if isinstance(request, httpx2.Request):
        # The query may carry a key (some gateways take one there); the path is enough.
        where = f" to {request.url.copy_with(query=None, fragment=None)}"
    return ProviderConnectionError(
        f"{provider} connection{where} {'timed out' if timed_out else 'failed'}: {_cause(exc)}",
        code="TIMEOUT" if timed_out else "CONNECTION_ERROR",
        retryable=True,
    )


class StreamDecoder(Protocol):
    """A wire-format decoder: SSE events in, stream chunks out."""

    @property
    def done(self) -> bool:
        """Whether the terminal event was seen."""
        ...

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Decode one event."""
        ...

    def feed_body(self, payload: dict[str, object]) -> list[StreamChunk]:
        """Decode a whole non-streaming JSON response."""
        ...

    def close(self) -> list[StreamChunk]:
        """End the stream and return the closing chunks; raises if it was cut short."""
        ...


async def _drain(body: AsyncIterator[bytes]) -> None:  # noqa: ASYNC910 - reads the body
    """Read the body to its end after the terminal event (briefly), so the connection is reused."""
    with trio.move_on_after(DRAIN_SECONDS):
        try:
            async for _ in body:
                pass
        except (httpx2.TransportError, httpx2.DecodingError):
            pass  # the stream is complete; a broken tail costs only the connection


def _undecodable(exc: httpx2.DecodingError, provider: str) -> ProviderConnectionError:
    """The typed error for a body whose content encoding (gzip, brotli) is corrupt.

    Retryable, like a dropped connection: a corrupt encoding is most often a
    proxy or cache failing mid-body, and the official SDKs, reading a body
    whole, raise it as their (retried) connection error too.
    """
    return ProviderConnectionError(
        f"{provider} response could not be decoded: {exc!r}",
        code="CONNECTION_ERROR",
        retryable=True,
    )


async def _release(body: AsyncGenerator[bytes, None], *, drain: bool) -> None:
    """Close *body*, first reading it to its end when the stream was complete.

    Runs once the closing chunks are out, so a server that holds the body open
    after the terminal event delays only the end of the stream, not its finish;
    it also runs for a consumer that stops at the finish chunk.
    """
    try:
        if drain:
            await _drain(body)
    finally:
        await body.aclose()


def _finished(decoder: StreamDecoder) -> bool:
    return decoder.done


async def _next_part(body: AsyncIterator[bytes], read_timeout: float, provider: str) -> bytes:
    """The next body part; raises ``StopAsyncIteration`` at the end, typed errors on failure."""
    with trio.move_on_after(read_timeout) as scope:
        try:
            return await body.__anext__()
        except httpx2.TimeoutException as exc:
            raise ProviderConnectionError(
                f"{provider} stream timed out: {exc!r}", code="TIMEOUT", retryable=True
            ) from exc
        except httpx2.TransportError as exc:
            raise ProviderConnectionError(
                f"{provider} stream failed: {exc!r}", code="STREAM_TRUNCATED", retryable=True
            ) from exc
        except httpx2.DecodingError as exc:
            raise _undecodable(exc, provider) from exc
    assert scope.cancelled_caught
    raise ProviderConnectionError(
        f"{provider} sent nothing for {read_timeout} s", code="TIMEOUT", retryable=True
    )


def _feed_tail(decoder: StreamDecoder, sse: SseDecoder, provider: str) -> list[StreamChunk]:
    """Decode the event the body ended with, if it ended without a blank line.

    An event that does not parse because the body ended inside its last line
    was cut there: that is a (retryable) truncation, not a malformed response.
    """
    out: list[StreamChunk] = []
    for event in sse.close():
        try:
            out.extend(decoder.feed(event))
        except ProviderStreamError as exc:
            if not sse.torn or exc.code != "MALFORMED_RESPONSE":
                raise
            raise ProviderConnectionError(
                f"{provider} stream ended inside an event: {exc.message}",
                code="STREAM_TRUNCATED",
                retryable=True,
            ) from exc
    return out


def _close(decoder: StreamDecoder, sse: SseDecoder) -> list[StreamChunk]:
    """The decoder's closing chunks; an incomplete stream that carried no event names what
    it carried instead (a proxy's error page, a JSON error body labelled an event stream).
    """
    try:
        return decoder.close()
    except ProviderConnectionError as exc:
        head = sse.eventless_head
        if not head:
            raise
        excerpt = head.decode("utf-8", "replace")
        raise ProviderConnectionError(
            f"{exc.message}: it carried no event, only {excerpt!r}",
            code=exc.code,
            retryable=exc.retryable,
        ) from exc


async def decode_response(
    response: httpx2.Response,
    decoder: StreamDecoder,
    *,
    provider: str,
    read_timeout: float = 600.0,
) -> AsyncGenerator[StreamChunk, None]:
    """Yield the chunks of an SSE *response*; stops reading at the terminal event.

    Transport failures and corrupt content encodings while reading, and
    silences longer than *read_timeout* (seconds, on trio's clock), raise
    :class:`ProviderConnectionError`. The closing chunks go out as soon as the
    terminal event arrives; the rest of the body is then read for at most
    ``DRAIN_SECONDS``. The caller owns (and closes) *response*.
    """
    if response.headers.get("content-type", "").startswith("application/json"):
        try:
            payload = loads_event(await response.aread())
        except httpx2.TransportError as exc:
            raise ProviderConnectionError(
                f"{provider} response failed: {exc!r}", code="STREAM_TRUNCATED", retryable=True
            ) from exc
        except httpx2.DecodingError as exc:
            raise _undecodable(exc, provider) from exc
        for chunk in (*decoder.feed_body(payload), *decoder.close()):
            yield chunk  # noqa: ASYNC911 - the chunks of one body read go out back to back
        return  # noqa: ASYNC911 - the body read was the checkpoint
    sse = SseDecoder()
    body = response.aiter_bytes()
    complete = False
    try:
        while not decoder.done:
            try:
                data = await _next_part(body, read_timeout, provider)
            except StopAsyncIteration:
                for chunk in _feed_tail(decoder, sse, provider):
                    yield chunk  # noqa: ASYNC911 - chunks of one read go out back to back
                break
            for event in sse.feed(data):
                for chunk in decoder.feed(event):
                    yield chunk  # noqa: ASYNC911 - chunks of one read go out back to back
                if _finished(decoder):
                    break
        closing = _close(decoder, sse)
        complete = True
        for chunk in closing:
            yield chunk  # noqa: ASYNC911 - the closing chunks go out back to back
    finally:
        await _release(body, drain=complete)


async def close_response(response: httpx2.Response) -> None:
    """Close *response* and its connection, shielded from cancellation for at most a second.

    A stream abandoned by an abort must not leave its connection half-read.
    """
    with trio.CancelScope(shield=True, deadline=trio.current_time() + 1.0):
        await response.aclose()


@final
class _Answer:
    """The response headers of the request being sent, once they arrived."""

    __slots__ = ("response", "waiting_for")

    def __init__(self) -> None:
        self.response: httpx2.Response | None = None
        self.waiting_for: int | None = None
        """While the request waits for a free connection: how many there are in all."""

    @property
    def failed(self) -> bool:
        """Whether the response has an error status."""
        return self.response is not None and self.response.status_code >= 400

    async def close(self) -> None:
        """Close the response, if there is one (the SDK left it open when its body failed)."""
        if self.response is None:
            await trio.lowlevel.checkpoint()
        else:
            await close_response(self.response)

    def error(self, provider: str, detail: str) -> ProviderError:
        """The error for a response whose body could not be had: its status's, when it has one."""
        response = self.response
        if response is None or not self.failed:
            return ProviderConnectionError(
                f"{provider} response failed: {detail}", code="CONNECTION_ERROR", retryable=True
            )
        return status_error(
            response.status_code, None, response.headers, provider=provider, detail=detail
        )


_answer: ContextVar[_Answer | None] = ContextVar("retinue_answer", default=None)


async def _note_answer(response: httpx2.Response) -> None:  # noqa: ASYNC910 - records only
    """An event hook: note the response the SDK is about to handle, for :func:`send_within`."""
    answer = _answer.get()
    if answer is not None:
        answer.response = response


async def send_within(
    send: Callable[[], Awaitable[httpx2.Response]], seconds: float, provider: str
) -> httpx2.Response:
    """Await ``send()`` (the request up to its response headers) for at most *seconds*.

    The SDKs read an error status's body themselves, outside their own
    handling of connection errors: a body that breaks, cannot be decoded or
    does not arrive in time raises the error of the status (typed, retryable
    as that status is), not a bare ``httpx2`` error or a header timeout.
    """
    answer = _Answer()
    token = _answer.set(answer)
    try:
        with trio.move_on_after(seconds):
            try:
                return await send()
            except (httpx2.TransportError, httpx2.DecodingError) as exc:
                error = answer.error(provider, f"its body could not be read: {exc!r}")
                await answer.close()
                raise error from exc
    finally:
        _answer.reset(token)
    if answer.failed:
        await answer.close()
        raise answer.error(provider, f"its body did not arrive within {seconds} s")
    if answer.waiting_for is not None:
        # Nothing was sent: the adapter's own connections were all busy.
        raise ProviderConnectionError(
            f"{provider} had no free connection within {seconds} s: all"
            f" {answer.waiting_for} (max_connections) were in use",
            code="POOL_TIMEOUT",
            retryable=True,
        )
    raise ProviderConnectionError(
        f"{provider} sent no response headers within {seconds} s", code="TIMEOUT", retryable=True
    )


def _without_lone_surrogates(value: object) -> object:
    """*value* (JSON data) with each lone surrogate in its strings replaced by U+FFFD.

    A surrogate pair held as two code points becomes its character, as a JSON
    round trip through the session log makes it.
    """
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {
            _without_lone_surrogates(key): _without_lone_surrogates(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    return value


async def post_encodable(
    post: Callable[[dict[str, object]], Awaitable[httpx2.Response]],
    body: dict[str, object],
    provider: str,
) -> httpx2.Response:
    """``post(body)``; a body with no UTF-8 form goes out with U+FFFD for each lone surrogate.

    A lone surrogate is lossless JSON, so the log keeps it (a file name that
    ``os.fsdecode`` gave), but the SDKs' UTF-8 encoding of the body refuses it
    before anything is sent. Replacing it only after that refusal leaves the
    usual request without an extra pass over the history.
    """
    try:
        return await post(body)
    except UnicodeEncodeError:
        pass
    cleaned = _without_lone_surrogates(body)
    assert isinstance(cleaned, dict)
    try:
        return await post(cleaned)
    except UnicodeEncodeError as exc:  # not the body: a header, say
        raise ProviderError(f"{provider} client error: {exc}", code="CLIENT_ERROR") from exc


class _SdkClient(Protocol):
    """What the adapters need of an SDK client: its base URL and ``close``."""

    @property
    def base_url(self) -> object: ...

    async def close(self) -> None: ...


class ClientOwner:
    """The lifecycle both adapters share: own one SDK client, close it once.

    Adapters are async context managers because nothing closes an SDK client
    for them under trio.
    """

    _client: _SdkClient
    _closed: bool = False

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._client.base_url)

    async def __aenter__(self) -> Self:
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the SDK client and its connections; idempotent, always a checkpoint.

        The close is shielded from cancellation for at most ``CLOSE_SECONDS``
        (then sockets are left to the OS), and a cancellation is raised only
        after it, so an adapter left during shutdown or a timeout is closed too.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        # Marked first, so a request started while the pools close is refused.
        self._closed = True
        with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_SECONDS):
            await self._client.close()
        await trio.lowlevel.checkpoint()
