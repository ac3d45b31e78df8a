"""The mock provider server: h11 over trio TCP, or in-process as an httpx2 transport."""

from __future__ import annotations

import random
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import final

import attrs
import h11
import httpx2
import trio

from ._exchange import STALL, Outgoing, Truncated, parse_call, respond
from ._policy import EchoPolicy, Policy
from ._values import MockCall, Timing

__all__ = ["MockServer", "MockServerStatistics", "open_mock_server"]

_SEND_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError)


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


@final
class MockServer:
    """An OpenAI/Anthropic-compatible HTTP server driven by a policy.

    Open it with :func:`open_mock_server`; point OpenAI clients at
    :attr:`openai_base_url` (``.../v1``) and Anthropic clients at :attr:`base_url`.
    :meth:`transport` serves the same policy in-process, without sockets
    (useful under a virtual clock).
    """

    def __init__(
        self, policy: Policy | None = None, *, timing: Timing | None = None, seed: int = 0
    ) -> None:
        self.policy: Policy = policy if policy is not None else EchoPolicy()
        self.timing = timing or Timing()
        self._rng = random.Random(seed)
        self._calls: list[MockCall] = []
        self._port: int | None = None
        self._counts = {
            "started": 0,
            "completed": 0,
            "aborted": 0,
            "faults": 0,
            "open": 0,
            "total": 0,
        }
        self._requests = 0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``; raises ``RuntimeError`` before the server listens."""
        if self._port is None:
            raise RuntimeError("the mock server is not listening")
        return f"http://127.0.0.1:{self._port}"

    @property
    def openai_base_url(self) -> str:
        """:attr:`base_url` with the ``/v1`` suffix OpenAI clients expect."""
        return self.base_url + "/v1"

    @property
    def calls(self) -> tuple[MockCall, ...]:
        """Every call received, in order."""
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
        )

    def transport(self) -> httpx2.AsyncBaseTransport:
        """An ``httpx2`` transport that serves requests in-process (no sockets)."""
        return _InProcessTransport(self)

    async def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> Outgoing:
        """Answer one request; waits for the policy's latency. Always a checkpoint."""
        await trio.lowlevel.checkpoint()
        number = self._requests
        self._requests += 1
        parsed = parse_call(path, headers, body, number) if method == "POST" else None
        if parsed is None:
            return Outgoing(405, (("content-type", "text/plain"),), b"method not allowed")
        if isinstance(parsed, Outgoing):
            return parsed
        self._calls.append(parsed)
        outgoing = await respond(self.policy, parsed, self.timing, self._rng)
        if outgoing.fault is not None:
            self._counts["faults"] += 1
        return outgoing

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
        self._port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._serve_connection, listeners)
            task_status.started()

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        self._counts["open"] += 1
        self._counts["total"] += 1
        connection = h11.Connection(h11.SERVER)
        try:
            while await self._one_exchange(connection, stream):
                connection.start_next_cycle()
        except (*_SEND_ERRORS, h11.RemoteProtocolError):
            pass
        finally:
            self._counts["open"] -= 1
            await stream.aclose()

    async def _one_exchange(self, connection: h11.Connection, stream: trio.SocketStream) -> bool:
        request = await _read_request(connection, stream)
        if request is None:
            return False
        head, body = request
        headers = {name.decode().lower(): value.decode() for name, value in head.headers}
        outgoing = await self.handle(head.method.decode(), head.target.decode(), headers, body)
        return await self._write(connection, stream, outgoing)

    async def _write(
        self, connection: h11.Connection, stream: trio.SocketStream, outgoing: Outgoing
    ) -> bool:
        headers = list(outgoing.headers)
        if isinstance(outgoing.body, bytes):
            headers.append(("content-length", str(len(outgoing.body))))
            await stream.send_all(
                connection.send(h11.Response(status_code=outgoing.status, headers=headers))
            )
            await stream.send_all(connection.send(h11.Data(data=outgoing.body)))
            await stream.send_all(connection.send(h11.EndOfMessage()))
            return connection.our_state is h11.DONE and connection.their_state is h11.DONE
        await stream.send_all(
            connection.send(h11.Response(status_code=outgoing.status, headers=headers))
        )
        return await self._write_stream(connection, stream, outgoing.body)

    async def _write_stream(
        self,
        connection: h11.Connection,
        stream: trio.SocketStream,
        parts: AsyncGenerator[bytes, None],
    ) -> bool:
        self._count("started")
        await trio.lowlevel.checkpoint()
        try:
            async with aclosing(parts):
                async for part in parts:
                    if part is STALL or not part:
                        await _hold(stream)
                        self._count("aborted")
                        return False
                    await stream.send_all(connection.send(h11.Data(data=part)))
            await stream.send_all(connection.send(h11.EndOfMessage()))
        except Truncated:
            self._count("completed")
            return False
        except _SEND_ERRORS:
            self._count("aborted")
            return False
        self._count("completed")
        return connection.their_state is h11.DONE


async def _hold(stream: trio.SocketStream) -> None:
    """Keep a stalled connection open until the client closes it."""
    while await _receive(stream):
        pass


async def _receive(stream: trio.SocketStream) -> bytes:
    try:
        return await stream.receive_some(65536)
    except _SEND_ERRORS:
        return b""  # noqa: ASYNC910 - receive_some raised, after its checkpoint


async def _read_request(
    connection: h11.Connection, stream: trio.SocketStream
) -> tuple[h11.Request, bytes] | None:
    await trio.lowlevel.checkpoint()
    head: h11.Request | None = None
    body: list[bytes] = []
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await _receive(stream))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body.append(event.data)
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return head, b"".join(body)
        else:
            return None


@final
class _InProcessTransport(httpx2.AsyncBaseTransport):
    """Serves a :class:`MockServer` policy to an httpx2 client without sockets."""

    def __init__(self, server: MockServer) -> None:
        self._server = server

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        headers = {name.lower(): value for name, value in request.headers.items()}
        outgoing = await self._server.handle(request.method, request.url.path, headers, body)
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
            self._finish("completed")
            raise httpx2.RemoteProtocolError(
                "peer closed connection without sending complete message body"
            ) from None
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
) -> AsyncIterator[MockServer]:
    """Run a mock provider server for the duration of the block.

    Opens its own nursery; yields once the server listens; leaving the block
    cancels the server and every connection it holds. An exception from the
    block propagates as itself, not wrapped in an exception group.
    """
    server = MockServer(policy, timing=timing, seed=seed)
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run, host, port)
        try:
            yield server
        except BaseException as exc:  # re-raised below, outside the nursery, unwrapped
            failure = exc
        finally:
            nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
