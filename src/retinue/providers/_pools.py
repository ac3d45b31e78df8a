"""Connection pools both adapters send through: sharded, ``max_connections`` in all.

A request's pool is named by its session's shard header, which is removed before it
is sent; :mod:`._http_client` builds the client over these pools.
"""

from __future__ import annotations

import functools
import ssl
import zlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Protocol, final, runtime_checkable

import httpx2
import trio
from httpx2._transports.default import map_httpcore_exceptions

from ._sending import _Answer, current_answer
from ._tunnels import mend_tunnels

__all__ = ["MAX_CONNECTIONS", "SHARD_HEADER", "PoolsClosedError", "ShardedTransport", "shard_key"]

MAX_CONNECTIONS = 65_536
"""The most connections an adapter opens: no host has more ports to reach one server by.

A larger ``max_connections`` is taken as this many: it could open no more, and
each ``pool_size`` of it would build a pool (``10**12`` would run the process out of
memory).
"""

SHARD_HEADER = "x-retinue-shard"
"""Request header naming the pool shard (see :func:`shard_key`); removed before sending."""


def shard_key(session_id: str) -> str:
    """The shard header's value for *session_id*: a checksum of it, in hex digits.

    An SDK builds its request headers as ASCII before the transport removes this
    one: a session id holding any other character (``café``) would fail every
    request of its session. Equal ids give equal keys, so a session keeps its pool.
    """
    return format(zlib.crc32(session_id.encode("utf-8", "surrogatepass")), "08x")


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

    With a *proxy* every pool reaches servers through it.
    """

    def __init__(
        self,
        shards: int,
        pool_size: int,
        *,
        max_connections: int | None = None,
        keepalive_expiry: float = 30.0,
        proxy: httpx2.Proxy | None = None,
    ) -> None:
        shards = max(1, shards)
        total = shards * pool_size if max_connections is None else max_connections
        if total < shards:
            raise ValueError(f"max_connections ({total}) must be at least the pools ({shards})")
        context = _ssl_context()
        self._keepalive_expiry = keepalive_expiry
        self._free = _pool_sizes(total, shards)
        self._pools = [
            httpx2.AsyncHTTPTransport(
                verify=context,
                limits=httpx2.Limits(
                    max_connections=size,
                    max_keepalive_connections=size,
                    keepalive_expiry=keepalive_expiry,
                ),
                proxy=proxy,
            )
            for size in self._free
        ]
        for pool in self._pools:
            mend_tunnels(pool)
        self._slots = trio.Semaphore(total)
        self._turn = 0
        self._closed = False
        self._waits: set[trio.CancelScope] = set()
        self.max_connections = total
        """Connections in total, over all pools."""

    def through(self, proxy: httpx2.Proxy) -> ShardedTransport:
        """Pools of these sizes that reach servers through *proxy*, within this total.

        Both share one count of connections in use, so the adapter keeps to
        ``max_connections`` requests at once whichever way they go (idle
        keep-alive connections are pooled per route). A request that
        holds a place in the count always finds room in its own transport's
        pools, since their sizes sum to the count.
        """
        proxied = ShardedTransport(
            self.shards,
            1,
            max_connections=self.max_connections,
            keepalive_expiry=self._keepalive_expiry,
            proxy=proxy,
        )
        proxied._slots = self._slots
        # One adapter's: closing either refuses the requests waiting on the shared count.
        proxied._waits = self._waits
        return proxied

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send *request* through the pool its shard header selects, or one with room."""
        key = request.headers.get(SHARD_HEADER)
        if key is None:
            self._turn = preferred = (self._turn + 1) % len(self._pools)
        else:
            del request.headers[SHARD_HEADER]
            preferred = zlib.crc32(key.encode()) % len(self._pools)
        if self._closed:
            # Sent again after the close (a redirect's next hop, say): no wait for a slot
            # that no close would end.
            raise _closed_error()
        answer = current_answer.get()
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            await self._wait_for_slot(answer)
        else:
            if answer is not None:
                answer.waited_for = None
        if answer is not None:
            answer.stage = "connecting"
            _SendWatch.install(request, answer)
        if self._closed:
            # A request that got its slot as the pools closed: sent now, it would open a
            # connection in a pool already closed, which nothing would ever close.
            self._slots.release()
            raise _closed_error()
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

    async def _wait_for_slot(self, answer: _Answer | None) -> None:
        """Wait for a connection to be released, saying so to :func:`send_within`.

        The mark stays when the wait is cancelled: a deadline that ends it
        reports the wait, not a silent server. :meth:`aclose` ends the wait at
        once, without a slot: a connection held by an idle stream may not free
        before the request's timeout.
        """
        if answer is not None:
            answer.stage = "waiting"
            answer.waited_for = self.max_connections
        started = trio.current_time()
        with trio.CancelScope() as wait:
            self._waits.add(wait)
            try:
                await self._slots.acquire()
            finally:
                self._waits.discard(wait)
                if answer is not None:
                    answer.waited += trio.current_time() - started
        if wait.cancelled_caught:
            raise _closed_error()

    def _release(self, index: int) -> None:
        self._free[index] += 1
        self._slots.release()

    async def aclose(self) -> None:
        """Close every pool, and refuse the requests still waiting for a connection; always a
        checkpoint."""
        self._closed = True
        for wait in self._waits:
            wait.cancel()
        await trio.lowlevel.checkpoint()
        for pool in self._pools:
            await pool.aclose()

    @property
    def shards(self) -> int:
        """How many pools there are."""
        return len(self._pools)


@final
class _SendWatch:
    """A request's ``trace`` hook: tells its answer when the request starts to go out, and
    when all of it is out.

    Until then the server has no whole request to act on, whatever the pool did (wait
    for a connection, open one, shake hands, write part of it), so a deadline there
    ends an unsent request.
    Through a proxy, httpcore sends a ``CONNECT`` with the request's hook first: that
    exchange opens the connection, and reaches no provider.
    A TLS handshake that a deadline cancels leaves its socket open (httpcore closes it
    on an error only), to be closed by the garbage collector with a
    ``ResourceWarning``: the hook closes it.
    """

    __slots__ = ("_answer", "_earlier", "_socket", "_tunnelling")

    def __init__(self, answer: _Answer, earlier: Callable[..., Awaitable[None]] | None) -> None:
        self._answer = answer
        self._earlier = earlier
        self._socket: _Closable | None = None
        self._tunnelling = False

    @classmethod
    def install(cls, request: httpx2.Request, answer: _Answer) -> None:
        """Watch *request* for *answer*, beside any ``trace`` hook it has."""
        earlier = request.extensions.get("trace")
        if isinstance(earlier, _SendWatch):  # a redirect's request keeps the extensions
            earlier = earlier._earlier
        request.extensions["trace"] = cls(answer, earlier)

    async def __call__(  # noqa: ASYNC910 - records; httpcore awaits it between its steps
        self, event: str, info: dict[str, object]
    ) -> None:
        if event.endswith(".send_request_headers.started"):
            self._tunnelling = _is_connect(info.get("request"))
            if not self._tunnelling:
                self._answer.stage = "sending"
        elif event.endswith(".send_request_body.complete"):
            if not self._tunnelling:
                self._answer.stage = "sent"
        elif event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            self._socket = stream if isinstance(stream, _Closable) else None
        elif (
            event == "connection.start_tls.failed"
            and self._socket is not None
            and not isinstance(info.get("exception"), Exception)
        ):
            with trio.CancelScope(shield=True):
                await self._socket.aclose()
        if self._earlier is not None:
            await self._earlier(event, info)


def _is_connect(request: object) -> bool:
    """Whether httpcore's *request* is a proxy's ``CONNECT``, which the adapters never send."""
    return getattr(request, "method", None) == b"CONNECT"


@runtime_checkable
class _Closable(Protocol):
    async def aclose(self) -> None: ...


@final
class PoolsClosedError(httpx2.TransportError):
    """A request refused by closed pools, before it was sent; the adapter reports it closed."""


def _closed_error() -> PoolsClosedError:
    return PoolsClosedError("the adapter's connection pools are closed")
