"""One TCP connection of the mock server: HTTP/1.1 by h11, one request at a time."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, final

import h11
import trio

from ._exchange import Outgoing, Truncated, api_for, bare_error
from ._values import Api

if TYPE_CHECKING:
    from ._server import MockServer

__all__ = ["Connection"]

_SEND_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError)
"""What a send or receive raises once the client has gone."""

logger = logging.getLogger("retinue.providers.mock")


@final
class Connection:
    """One TCP connection: its h11 state and how far the current response has got."""

    def __init__(self, server: MockServer, stream: trio.SocketStream, limit: int) -> None:
        self._server = server
        self._stream = stream
        self._limit = limit
        """The largest request body kept: one past it is read, dropped and answered 413."""
        self._h11 = h11.Connection(h11.SERVER)
        self._api: Api = "chat"
        self._sent = False
        """Whether any byte of the current response has gone out."""

    async def serve(self) -> None:
        """Serve requests until the connection ends; contains every failure to it."""
        await trio.lowlevel.checkpoint()
        try:
            while await self._exchange():
                self._h11.start_next_cycle()
        except _SEND_ERRORS:
            pass
        except h11.RemoteProtocolError as exc:
            await self._fail(exc.error_status_hint, f"the request is not valid HTTP: {exc}")
        except Exception as exc:
            logger.exception("mock server: a connection failed")
            await self._fail(500, f"the mock server failed: {exc!r}")

    async def _fail(self, status: int, message: str) -> None:
        """Answer *status* if no response has begun; the connection closes after."""
        await trio.lowlevel.checkpoint()
        if self._sent:
            return
        self._sent = True
        with contextlib.suppress(*_SEND_ERRORS):
            await self._stream.send_all(bare_error(status, self._api, message))

    async def _exchange(self) -> bool:
        self._sent = False
        self._api = "chat"
        request = await self._read_request()
        if request is None:
            return False
        head, body = request
        # header bytes need not be UTF-8; latin-1 decodes any byte, as HTTP/1.1 allows
        target = head.target.decode("latin-1")
        self._api = api_for(target) or "chat"
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in head.headers}
        method = head.method.decode("latin-1")
        outgoing = await self._answer(method, target, headers, body)
        return outgoing is not None and await self._write(outgoing)

    async def _answer(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> Outgoing | None:
        """The server's answer; ``None`` once the client closed the connection waiting for it.

        Nothing else reads the socket while the policy's latency runs: a client that
        gave up would hold its connection, and this task, until the latency ended
        (``math.inf``: until the server closed).
        """
        latency = self._server.timing.latency
        if not callable(latency) and latency == 0:  # answered at once: no wait to watch
            return await self._server.handle(method, target, headers, body)
        answer: Outgoing | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._cancel_on_close, nursery.cancel_scope)
            answer = await self._server.handle(method, target, headers, body)
            nursery.cancel_scope.cancel()
        return answer

    async def _cancel_on_close(self, waiting: trio.CancelScope) -> None:
        """Cancel *waiting* when the client closes; what it sends meanwhile (its next
        request, pipelined) is kept for the next exchange. A client that shuts only
        its sending side is taken as gone: TCP tells the two apart no other way."""
        while data := await _receive(self._stream):
            self._h11.receive_data(data)
        waiting.cancel()

    async def _read_request(self) -> tuple[h11.Request, bytes | None] | None:
        await trio.lowlevel.checkpoint()
        head: h11.Request | None = None
        body: list[bytes] = []
        size = 0
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                if self._h11.they_are_waiting_for_100_continue:
                    await self._send(h11.InformationalResponse(status_code=100, headers=[]))
                self._h11.receive_data(await _receive(self._stream))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                size += len(event.data)
                # Past the limit the rest is read and dropped, not held: answered 413, as
                # the real APIs answer, once it has all come.
                if size <= self._limit:
                    body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return head, None if size > self._limit else b"".join(body)
            else:
                return None

    async def _send(self, event: h11.Event) -> None:
        data = self._h11.send(event) or b""
        if not isinstance(event, h11.InformationalResponse):
            self._sent = True
        await self._stream.send_all(data)

    async def _write(self, outgoing: Outgoing) -> bool:
        headers = list(outgoing.headers)
        if isinstance(outgoing.body, bytes):
            headers.append(("content-length", str(len(outgoing.body))))
        await self._send(h11.Response(status_code=outgoing.status, headers=headers))
        if not isinstance(outgoing.body, bytes):
            return await self._write_stream(outgoing.body)
        await self._send(h11.Data(data=outgoing.body))
        await self._send(h11.EndOfMessage())
        return self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE

    async def _write_stream(self, parts: AsyncGenerator[bytes, None]) -> bool:
        self._server._count("started")
        # Cut short unless it ends otherwise: a failure, the server's shutdown (a
        # cancellation) leave the client an incomplete body.
        outcome = "truncated"
        try:
            outcome = await self._watched(parts)
        finally:
            self._server._count(outcome)
        return outcome == "completed" and self._h11.their_state is h11.DONE

    async def _watched(self, parts: AsyncGenerator[bytes, None]) -> str:
        """Send *parts* while watching for the client's close, which ends every wait of
        the stream (its first token, the gaps between chunks, a linger, a stall): a
        client that gave up would otherwise hold its connection, and this task, until
        the wait ended. Returns the stream's outcome."""
        outcome = "aborted"  # unless sent before the client left
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._cancel_on_close, nursery.cancel_scope)
            outcome = await self._send_parts(parts)
            nursery.cancel_scope.cancel()
        return outcome

    async def _send_parts(self, parts: AsyncGenerator[bytes, None]) -> str:
        await trio.lowlevel.checkpoint()
        try:
            async with aclosing(parts):
                async for part in parts:
                    if not part:  # STALL: held open until the client closes it
                        await trio.sleep_forever()
                    await self._send(h11.Data(data=part))
            await self._send(h11.EndOfMessage())
        except Truncated:
            return "truncated"
        except _SEND_ERRORS:
            return "aborted"
        return "completed"


async def _receive(stream: trio.SocketStream) -> bytes:
    try:
        return await stream.receive_some(65536)
    except _SEND_ERRORS:
        return b""  # noqa: ASYNC910 - receive_some raised, after its checkpoint
