"""HTTP plumbing shared by the adapters: connection failures named, SSE stream pumping."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Protocol

import httpx2
import trio

from retinue._stream import StreamChunk

from ._blocks import loads_event, malformed
from ._failures import ProviderConnectionError, ProviderError, ProviderStreamError, unsent
from ._pairs import PairedDeltas
from ._pools import PoolsClosedError
from ._sending import server_named
from ._sse import SseDecoder, SseEvent

__all__ = [
    "StreamDecoder",
    "connection_failed",
    "decode_response",
    "server_named",
    "shown_url",
]

DRAIN_SECONDS = 1.0
"""How long to wait for the end of a body after its terminal event."""

MAX_EVENT_BYTES = 32 * 1024 * 1024
"""The longest event, or whole JSON body, read: the largest request the APIs take.

An answer is far shorter. A server sending a longer one (a line that never
ends) would otherwise be held in memory until it ended, or the memory did.
"""


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


def shown_url(url: str | httpx2.URL) -> str:
    """*url* as a message or repr may show it: without the password or query it may carry.

    A gateway may take a key in the query, or basic auth in the userinfo.
    """
    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError):
        return "<a URL that cannot be parsed>"
    return str(parsed.copy_with(query=None, fragment=None, userinfo=b""))


def _server_of(response: httpx2.Response, provider: str) -> str:
    """*provider* and the server that sent *response*, for its timeouts and breaks."""
    try:
        return server_named(provider, response.request.url)
    except RuntimeError:  # a response built without its request
        return provider


def connection_failed(
    exc: Exception, provider: str, *, timed_out: bool
) -> tuple[ProviderError, Exception | None]:
    """The typed error for an SDK's connection failure *exc*, and the cause to raise it from.

    Where the request was going and why it failed. A request that is not valid
    HTTP (a header value with a line break: a key pasted with its newline) was
    never sent: a client error, not retried, with no cause, as the SDK's error
    and its cause quote the header, and its value is most often the key. Such a
    request, and one whose connection could not be made, is marked unsent.
    """
    request = getattr(exc, "request", None)
    where = ""
    if isinstance(request, httpx2.Request):
        where = f" to {shown_url(request.url)}"
    if isinstance(exc.__cause__, httpx2.LocalProtocolError):
        refused = ProviderError(
            f"{provider} request{where} is not valid HTTP, so it was not sent: a header"
            " name or value holds a character HTTP forbids, such as a line break",
            code="CLIENT_ERROR",
        )
        return unsent(refused), None
    failed = ProviderConnectionError(
        f"{provider} connection{where} {'timed out' if timed_out else 'failed'}: {_cause(exc)}",
        code="TIMEOUT" if timed_out else "CONNECTION_ERROR",
        retryable=True,
    )
    if isinstance(exc.__cause__, _NOTHING_SENT):
        unsent(failed)
    return failed, exc


_NOTHING_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.ProxyError, PoolsClosedError)
"""The transport failures of a request that never left: no connection (a proxy that
refused to open one too), or pools closed."""


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
    """Close *body*, first reading it to its end (for at most ``DRAIN_SECONDS``) when the
    stream was complete.

    Runs once the closing chunks are out, and when a consumer closes the stream
    at its finish chunk, as the runtime does: that close, and so the turn, waits
    for the read. A server that holds the body open after the terminal event
    costs each request those seconds, and then the connection.
    """
    try:
        if drain:
            await _drain(body)
    finally:
        await body.aclose()


def _finished(decoder: StreamDecoder) -> bool:
    # A call, not the property: within ``while not decoder.done`` a type checker narrows
    # it to False, and (with --warn-unreachable) takes the check after feed() as dead code.
    return decoder.done


async def _next_part(
    body: AsyncIterator[bytes], read_timeout: float, provider: str, *, server: str
) -> bytes:
    """The next body part; raises ``StopAsyncIteration`` at the end, typed errors on failure.

    A timeout names the *server* (the provider and its host).
    """
    with trio.move_on_after(read_timeout) as scope:
        try:
            return await body.__anext__()
        except httpx2.TimeoutException as exc:
            raise ProviderConnectionError(
                f"{server} stream timed out: {exc!r}", code="TIMEOUT", retryable=True
            ) from exc
        except httpx2.TransportError as exc:
            raise ProviderConnectionError(
                f"{provider} stream failed: {exc!r}", code="STREAM_TRUNCATED", retryable=True
            ) from exc
        except httpx2.DecodingError as exc:
            raise _undecodable(exc, provider) from exc
    assert scope.cancelled_caught
    raise ProviderConnectionError(
        f"{server} sent nothing for {read_timeout} s", code="TIMEOUT", retryable=True
    )


async def _whole_body(
    body: AsyncGenerator[bytes, None],
    head: list[bytes],
    read_timeout: float,
    provider: str,
    *,
    server: str,
) -> bytes:
    """The whole *body*, its *head* read already, read part by part as a stream is.

    So a body that stops arriving times out after *read_timeout* seconds of
    silence (on trio's clock), as a stalled stream does, and its failures are
    typed alike.
    """
    parts = head
    size = sum(map(len, parts))
    try:
        while True:
            try:
                parts.append(await _next_part(body, read_timeout, provider, server=server))
            except StopAsyncIteration:
                return b"".join(parts)  # noqa: ASYNC910 - reads the body, as aread() does
            size += len(parts[-1])
            if size > MAX_EVENT_BYTES:
                raise _overlong(f"{provider} response body")
    finally:
        await body.aclose()


_EVENT_STREAM_STARTS = (b"data:", b"event:", b"id:", b"retry:", b":")
"""How an event stream starts: with a field, or a comment (a keep-alive)."""
_SNIFFED_BYTES = len(b"retry:")
_BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark, which an event stream may start with."""


async def _head(
    body: AsyncIterator[bytes], read_timeout: float, provider: str, *, server: str
) -> list[bytes]:
    """The first bytes of a body labelled JSON, as one part: enough to tell it from an event
    stream.

    The SDKs read a streamed answer as an event stream whatever its media
    type, so a server or proxy that labels one ``application/json`` works
    with them: its answer is no JSON document to read whole. One part, so
    that a byte order mark the network split reaches the event decoder whole.
    """
    parts: list[bytes] = []
    start = b""  # the body's first bytes, until they tell whether a byte order mark opens it
    seen = b""  # the body so far, without the mark and the blank start that tell nothing
    size = 0
    while len(seen) < _SNIFFED_BYTES:
        try:
            part = await _next_part(body, read_timeout, provider, server=server)
        except StopAsyncIteration:
            break
        parts.append(part)
        size += len(part)
        if size > MAX_EVENT_BYTES:
            raise _overlong(f"{provider} response body")
        if len(start) < len(_BOM):
            start += part
            maybe_mark = len(start) < len(_BOM) and _BOM.startswith(start)
            seen = b"" if maybe_mark else start.removeprefix(_BOM).lstrip()
        else:
            seen = (seen + part).lstrip()
    return [b"".join(parts)]  # noqa: ASYNC910 - the loop reads at least once


def _is_event_stream(head: list[bytes]) -> bool:
    return b"".join(head).removeprefix(_BOM).lstrip().startswith(_EVENT_STREAM_STARTS)


def _overlong(where: str) -> ProviderStreamError:
    return malformed(
        f"{where}: longer than {MAX_EVENT_BYTES} bytes, which no answer is: it was not read further"
    )


_MALFORMED = "MALFORMED_RESPONSE"


def _placed(exc: ProviderStreamError, where: str) -> ProviderStreamError:
    """The stream error *exc* (malformed data, or an error the provider reported), saying
    *where* it came.

    A decoder knows what it could not read or what the error said, not which
    adapter read it nor how far into the response: this adds both, so a
    runtime with several providers can tell whose stream it was.
    """
    return ProviderStreamError(
        f"{where}: {exc.message}",
        code=exc.code,
        status=exc.status,
        retry_after=exc.retry_after,
        retryable=exc.retryable,
        headers=exc.headers,
    )


def _feed(decoder: StreamDecoder, event: SseEvent, provider: str, number: int) -> list[StreamChunk]:
    """Decode *event*, the stream's *number*-th; a stream error raised names both."""
    try:
        return decoder.feed(event)
    except ProviderStreamError as exc:
        raise _placed(exc, f"{provider} stream, event {number}") from exc


def _feed_tail(
    decoder: StreamDecoder, sse: SseDecoder, provider: str, number: int
) -> list[StreamChunk]:
    """Decode the event the body ended with (event *number*), if it ended without a blank line.

    An event that does not parse because the body ended inside its last line
    was cut there: that is a (retryable) truncation, not a malformed response.
    """
    out: list[StreamChunk] = []
    for event in sse.close():
        try:
            out.extend(decoder.feed(event))
        except ProviderStreamError as exc:
            if exc.code != _MALFORMED or not sse.torn:
                raise _placed(exc, f"{provider} stream, event {number}") from exc
            raise ProviderConnectionError(
                f"{provider} stream ended inside event {number}: {exc.message}",
                code="STREAM_TRUNCATED",
                retryable=True,
            ) from exc
    return out


def _events(count: int) -> str:
    return "1 event" if count == 1 else f"{count} events"


def _cut(exc: ProviderConnectionError, provider: str, sse: SseDecoder) -> ProviderConnectionError:
    """*exc*, a stream cut short, saying whose stream it was and how far it had come.

    Raised from what *exc* was raised from (the transport's error, if any). One
    that carried no event says what it carried instead (a proxy's error
    page, a JSON error body labelled an event stream).
    """
    message = (
        exc.message if exc.message.startswith(f"{provider} ") else f"{provider}: {exc.message}"
    )
    head = sse.eventless_head
    if head:
        message += f": it carried no event, only {head.decode('utf-8', 'replace')!r}"
    else:
        message += f", after {_events(sse.dispatched)}"
    return ProviderConnectionError(message, code=exc.code, retryable=exc.retryable)


def _close(decoder: StreamDecoder, sse: SseDecoder, provider: str) -> list[StreamChunk]:
    """The decoder's closing chunks; a stream cut short says whose it was and how far it came,
    and one found malformed at its end whose it was, as a failure at an event does."""
    try:
        return decoder.close()
    except ProviderConnectionError as exc:
        raise _cut(exc, provider, sse) from exc.__cause__
    except ProviderStreamError as exc:
        raise _placed(exc, f"{provider} stream, at its end") from exc


def _whole_body_chunks(decoder: StreamDecoder, body: bytes, provider: str) -> list[StreamChunk]:
    """The chunks of a whole JSON *body*; a stream error raised names the body."""
    try:
        return [*decoder.feed_body(loads_event(body)), *decoder.close()]
    except ProviderStreamError as exc:
        raise _placed(exc, f"{provider} response body") from exc


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
    body = response.aiter_bytes()
    named = _server_of(response, provider)
    head: list[bytes] = []
    # Media types are case-insensitive: a server may write Application/JSON.
    if response.headers.get("content-type", "").lower().startswith("application/json"):
        try:
            head = await _head(body, read_timeout, provider, server=named)
        except BaseException:
            await body.aclose()
            raise
        if not _is_event_stream(head):
            body_read = await _whole_body(body, head, read_timeout, provider, server=named)
            for chunk in _whole_body_chunks(decoder, body_read, provider):
                yield chunk  # noqa: ASYNC911 - the chunks of one body read go out back to back
            return  # noqa: ASYNC911 - the body read was the checkpoint
    sse = SseDecoder()
    pairs = PairedDeltas()
    complete = False
    events = 0
    try:
        while not decoder.done:
            try:
                # The parts read to tell a stream labelled JSON from JSON go first.
                data = (
                    head.pop(0)
                    if head
                    else await _next_part(body, read_timeout, provider, server=named)
                )
            except ProviderConnectionError as exc:
                raise _cut(exc, provider, sse) from exc.__cause__
            except StopAsyncIteration:
                for chunk in pairs.whole(_feed_tail(decoder, sse, provider, events + 1)):
                    yield chunk  # noqa: ASYNC911 - chunks of one read go out back to back
                break
            dispatched = sse.feed(data)
            if sse.pending_bytes > MAX_EVENT_BYTES:
                raise _overlong(f"{provider} stream, event {events + len(dispatched) + 1}")
            for event in dispatched:
                events += 1
                for chunk in pairs.whole(_feed(decoder, event, provider, events)):
                    yield chunk  # noqa: ASYNC911 - chunks of one read go out back to back
                if _finished(decoder):
                    break
        closing = [*pairs.whole(_close(decoder, sse, provider)), *pairs.rest()]
        complete = True
        for chunk in closing:
            yield chunk  # noqa: ASYNC911 - the closing chunks go out back to back
    finally:
        await _release(body, drain=complete)
