"""The mock provider server: h11 over trio TCP, or in-process as an httpx2 transport."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import NoReturn, final

import attrs
import httpx2
import trio

from retinue._endings import holds_interrupt, lone_ending, reraise

from ._connection import Connection
from ._exchange import (
    Outgoing,
    Truncated,
    api_for,
    failure,
    not_allowed,
    parse_call,
    respond,
)
from ._interrupts import Ending, WatchedListener, ending_in, raise_ending
from ._policy import EchoPolicy, Policy
from ._timing import Timing
from ._values import MockCall, check_server_options

__all__ = ["MockServer", "MockServerStatistics", "open_mock_server"]

DEFAULT_MAX_CALLS = 1000
"""How many calls :attr:`MockServer.calls` keeps by default (the most recent)."""

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The largest request body served (Anthropic's limit); a larger one is answered 413."""

_KEYS_REMEMBERED = 65_536
"""How many distinct request keys the occurrence counts cover (the most recent).

A retry usually follows its request within seconds; a key forgotten earlier
starts counting again from 0.
"""

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104 - names, not a bind
"""The loopback address that reaches a server listening on every interface of a family."""

logger = logging.getLogger("retinue.providers.mock")


@final
@attrs.frozen
class MockServerStatistics:
    """A snapshot of what the mock server has done."""

    requests: int
    """Requests received."""
    streams_started: int
    """Streaming (chunked) responses begun."""
    streams_completed: int
    """Streaming responses sent to their end."""
    streams_aborted: int
    """Streaming responses the client abandoned (closed the connection or response)."""
    faults: int
    """Responses that carried an injected fault."""
    connections_open: int
    """TCP connections open now."""
    connections_total: int
    """TCP connections accepted so far."""
    streams_truncated: int = 0
    """Streaming responses the server cut short: a ``truncated`` fault, a failure
    mid-stream, or the server closing while they were sent."""


@final
class MockServer:
    """An OpenAI/Anthropic-compatible HTTP server driven by a policy.

    Open it with :func:`open_mock_server`; point OpenAI clients at
    :attr:`openai_base_url` (``.../v1``) and Anthropic clients at :attr:`base_url`.
    :meth:`transport` serves the same policy in-process, without sockets
    (useful under a virtual clock).

    A body that is not JSON (or is nested too deeply), lacks a field its API
    requires or holds one it reads of the wrong JSON type (the model, messages
    or input, stream, the token limit, tools) gets a 400 in the API's
    error shape. A request that fails otherwise (a policy or timing
    function that raises, a reply that cannot be sent) is logged and
    answered with a 500 in that shape, or, once its response has begun,
    ends its own connection; the server and every other connection keep
    serving.

    ``seed`` seeds the :class:`Timing` draws, per request (see
    :meth:`MockCall.rng`). :attr:`calls` keeps the last ``max_calls`` calls
    (``None``: all of them, which grows without bound under load).
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        timing: Timing | None = None,
        seed: int = 0,
        max_calls: int | None = DEFAULT_MAX_CALLS,
    ) -> None:
        check_server_options(policy, timing, max_calls)
        self.policy: Policy = policy if policy is not None else EchoPolicy()
        self.timing = timing or Timing()
        self.seed = seed
        self._calls: deque[MockCall] = deque(maxlen=max_calls)
        self._occurrences: dict[str, int] = {}
        self._address: tuple[str, int] | None = None
        self._counts = dict.fromkeys(
            ("started", "completed", "aborted", "truncated", "faults", "open", "total"), 0
        )
        self._requests = 0
        self._ending: Ending | None = None
        """The first Ctrl-C (else ``SystemExit``) that landed in a connection task or an
        accept, for open_mock_server."""
        self._block: trio.CancelScope | None = None
        """The scope of open_mock_server's block, which such an ending cancels first."""
        # Parked on by an accept out of descriptors, until a connection closes.
        self._closed = trio.lowlevel.ParkingLot()

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the address it listens on; ``RuntimeError`` before it listens.

        An IPv6 host is bracketed (``http://[::1]:PORT``). A server listening
        on every interface (``0.0.0.0``, ``::``) is reached on the loopback
        address of that family: the wildcard is no address to connect to.
        """
        if self._address is None:
            raise RuntimeError("the mock server is not listening")
        host, port = self._address
        host = _WILDCARDS.get(host, host)
        if ":" not in host:
            return f"http://{host}:{port}"
        # a link-local address's zone (fe80::1%eth0) is written %25 in a URL (RFC 6874)
        return f"http://[{host.replace('%', '%25')}]:{port}"

    @property
    def openai_base_url(self) -> str:
        """:attr:`base_url` with the ``/v1`` suffix OpenAI clients expect."""
        return self.base_url + "/v1"

    @property
    def calls(self) -> tuple[MockCall, ...]:
        """The calls received, oldest first: the last ``max_calls`` of them."""
        return tuple(self._calls)

    def statistics(self) -> MockServerStatistics:
        """A snapshot of the counters; never blocks."""
        c = self._counts
        return MockServerStatistics(
            self._requests,
            c["started"],
            c["completed"],
            c["aborted"],
            c["faults"],
            c["open"],
            c["total"],
            c["truncated"],
        )

    def transport(self) -> httpx2.AsyncBaseTransport:
        """An ``httpx2`` transport that serves requests in-process (no sockets)."""
        return _InProcessTransport(self)

    async def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None
    ) -> Outgoing:
        """Answer one request; waits for the policy's latency. Always a checkpoint.

        *body* is ``None`` for one past :data:`MAX_REQUEST_BYTES`, read and
        dropped: it is answered 413. Never raises ``Exception``: a failure
        becomes a logged 500 response.
        """
        await trio.lowlevel.checkpoint()
        number = self._requests
        self._requests += 1
        api = api_for(path) or "chat"
        if method != "POST":
            return not_allowed(api, method)
        if body is None:
            return failure(api, f"the request body is larger than {MAX_REQUEST_BYTES} bytes", 413)
        try:
            parsed = parse_call(path, headers, body, number)
            if isinstance(parsed, Outgoing):
                return parsed
            call = self._record(parsed)
        except Exception as exc:
            logger.exception("mock server: could not take request %d", number)
            return failure(api, f"the mock server failed: {exc!r}")
        outgoing = await respond(self.policy, call, self.timing, call.rng(self.seed, "timing"))
        if outgoing.fault is not None:
            self._counts["faults"] += 1
        return outgoing

    def _record(self, call: MockCall) -> MockCall:
        """Number *call* among equal requests and log it."""
        occurrence = self._occurrences.pop(call.key, 0)
        self._occurrences[call.key] = occurrence + 1  # reinserted: now the most recent
        if len(self._occurrences) > _KEYS_REMEMBERED:
            del self._occurrences[next(iter(self._occurrences))]
        call = attrs.evolve(call, occurrence=occurrence)
        self._calls.append(call)
        return call

    def _count(self, name: str) -> None:
        self._counts[name] += 1

    async def run(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve TCP until cancelled; reports started once listening."""
        listeners = await trio.open_tcp_listeners(port, host=host)
        # getsockname() gives (host, port), and two more fields for IPv6
        bound_host, bound_port = listeners[0].socket.getsockname()[:2]
        self._address = (bound_host, bound_port)
        watched = [
            WatchedListener(listener, self._keep_ending, self._closed) for listener in listeners
        ]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._serve_connection, watched)
            task_status.started()

    def _keep_ending(self, ending: Ending | None) -> None:
        """Keep the first Ctrl-C (else ``SystemExit``) that landed in a task of the server,
        for open_mock_server: Ctrl-C after a ``SystemExit`` is the user's, and wins."""
        if self._ending is None or (
            isinstance(ending, KeyboardInterrupt) and isinstance(self._ending, SystemExit)
        ):
            self._ending = ending

    async def _end(self, error: BaseException) -> NoReturn:
        """Keep *error* if it ends the run (Ctrl-C, a ``SystemExit``), cancel open_mock_server's
        block alone and wait, the task's connection open, until the server closes once the
        block is out. Raises *error* if it ends nothing, or when no block runs (:meth:`run`).

        Raised at once, the ending would cancel the server's nursery: every connection would
        close while the agents streaming from them still run, and their turns would be stored
        as failed streams, where a runtime in the block ends each turn in flight disposed.
        """
        ending = ending_in(error)
        self._keep_ending(ending)
        if ending is None or self._block is None:
            raise error
        self._block.cancel()
        await trio.sleep_forever()

    # Protected from Ctrl-C except while the connection is served: the server's own
    # bookkeeping is never left half done, and a policy that runs without end cannot hold
    # Ctrl-C back, as it would if the whole task were protected.
    @trio.lowlevel.enable_ki_protection
    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        self._counts["open"] += 1
        self._counts["total"] += 1
        try:
            await _serve_unprotected(Connection(self, stream, MAX_REQUEST_BYTES))
        except BaseException as exc:
            # Kept before the checkpoints that close the stream (here and in trio's
            # serve_listeners): once the server is cancelled, the Cancelled one of them
            # raises takes the place of Ctrl-C (or SystemExit), and the server's cancelled
            # scope swallows it.
            await self._end(exc)
        finally:
            self._counts["open"] -= 1
            try:
                await stream.aclose()
            finally:
                self._closed.unpark_all()  # a descriptor freed: an accept may wait for one


@trio.lowlevel.disable_ki_protection
async def _serve_unprotected(connection: Connection) -> None:
    """Serve *connection*, Ctrl-C landing in its synchronous code (a policy's, a ``Timing``
    function's) as that runs; coming while it waits, trio hands Ctrl-C to the main task."""
    await connection.serve()


@final
class _InProcessTransport(httpx2.AsyncBaseTransport):
    """Serves a :class:`MockServer` policy to an httpx2 client without sockets."""

    def __init__(self, server: MockServer) -> None:
        self._server = server

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        kept = body if len(body) <= MAX_REQUEST_BYTES else None  # None: answered 413
        headers = {name.lower(): value for name, value in request.headers.items()}
        outgoing = await self._server.handle(request.method, request.url.path, headers, kept)
        if isinstance(outgoing.body, bytes):
            return httpx2.Response(
                outgoing.status, headers=list(outgoing.headers), content=outgoing.body
            )
        return httpx2.Response(
            outgoing.status,
            headers=list(outgoing.headers),
            stream=_InProcessStream(self._server, outgoing.body),
        )


@final
class _InProcessStream(httpx2.AsyncByteStream):
    def __init__(self, server: MockServer, parts: AsyncGenerator[bytes, None]) -> None:
        self._server = server
        self._parts = parts
        self._finished = False
        server._count("started")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._parts:
                if not part:
                    await trio.sleep_forever()
                yield part
        except Truncated:
            self._finish("truncated")
            raise httpx2.RemoteProtocolError(
                "peer closed connection without sending complete message body"
            ) from None
        except Exception as exc:
            # over TCP the connection would close here; the client sees the same cut
            logger.exception("mock server: a stream failed")
            self._finish("truncated")
            raise httpx2.RemoteProtocolError("the mock server failed mid-stream") from exc
        finally:
            await self._parts.aclose()
        self._finish("completed")

    def _finish(self, outcome: str) -> None:
        if not self._finished:
            self._finished = True
            self._server._count(outcome)

    async def aclose(self) -> None:
        self._finish("aborted")
        await trio.lowlevel.checkpoint()


@asynccontextmanager
async def open_mock_server(
    policy: Policy | None = None,
    *,
    timing: Timing | None = None,
    seed: int = 0,
    host: str = "127.0.0.1",
    port: int = 0,
    max_calls: int | None = DEFAULT_MAX_CALLS,
) -> AsyncIterator[MockServer]:
    """Run a mock provider server for the duration of the block.

    Opens its own nursery; yields once the server listens; leaving the block
    cancels the server and every connection it holds. An exception from the
    block, or the ``OSError`` of an address it cannot listen on, propagates
    as itself, not wrapped in an exception group. Ctrl-C (a SIGINT) landing in a
    connection task, in a policy's synchronous code say, even one that loops without
    end, or raised there, cancels the block alone: the connections stay open until
    it is out, so a runtime in it ends its turns in flight disposed before the server
    closes the connections they stream from. Coming between the server's synchronous
    steps, it goes to the program's main task, as trio hands it. Ctrl-C from a
    connection task, or raised in the accept, propagates as itself, whatever the block
    did meanwhile: an error the block raised is its ``__context__``. So does a
    ``SystemExit`` raised there (a policy's), unless the block raised Ctrl-C (bare,
    or in a group of its own nursery, raised as the block raised it). The options
    are :class:`MockServer`'s.
    """
    server = MockServer(policy, timing=timing, seed=seed, max_calls=max_calls)
    failure: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(server.run, host, port)
            except OSError as exc:  # a port in use, say: raised below, as itself
                failure = exc
            else:
                with trio.CancelScope() as server._block:
                    try:
                        yield server
                    except BaseException as exc:  # re-raised below, outside the nursery
                        failure = exc
                    finally:
                        nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        _raise_group(group, server._ending, failure)
    ending = server._ending
    if ending is not None and not (isinstance(ending, SystemExit) and holds_interrupt(failure)):
        raise_ending(ending, failure)
    if failure is not None:
        raise failure


def _raise_group(
    group: BaseExceptionGroup[BaseException], kept: Ending | None, failure: BaseException | None
) -> None:
    """Raise what the server's nursery raised, *group*, unless the ending *kept* is to be
    raised: Ctrl-C always, a ``SystemExit`` when the group holds nothing but cancels.

    Ctrl-C landing elsewhere in the server's tasks (between accepts, say) comes inside
    their nurseries' groups, when no cancel took its place: raised as itself, as a lone
    ``SystemExit`` is.
    """
    if isinstance(kept, KeyboardInterrupt):
        return
    failures = group.split(trio.Cancelled)[1]
    if failures is None:
        if kept is None:
            raise group
        return
    ending = lone_ending(failures, failure)
    if ending is None:
        raise group
    reraise(ending)
