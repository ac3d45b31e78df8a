"""The mock server's listener takes a burst of connections in one scheduler pass."""

from __future__ import annotations

import errno
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import attrs
import pytest
import trio

from retinue.providers.mock import _interrupts
from retinue.providers.mock._interrupts import Ending, WatchedListener

from ._mock_server_kit import REAL_DEADLINE

BURST = 5


class _Passes(trio.abc.Instrument):
    """Counts the scheduler passes that resume *task*."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.count = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.count += 1


@attrs.define
class _Listening:
    """A watched listener, the clients queued on it and what it hands out."""

    watched: WatchedListener
    clients: list[trio.SocketStream]
    closed: trio.lowlevel.ParkingLot
    kept: list[Ending]
    accepted: list[trio.SocketStream] = attrs.field(factory=list)

    async def accept(self) -> None:
        self.accepted.append(await self.watched.accept())


@asynccontextmanager
async def _listening() -> AsyncIterator[_Listening]:
    """A watched listener with BURST client connections queued on it, all closed at the end."""
    async with AsyncExitStack() as stack:
        [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
        kept: list[Ending] = []
        closed = trio.lowlevel.ParkingLot()
        watched = WatchedListener(listener, kept.append, closed)
        stack.push_async_callback(watched.aclose)
        port = listener.socket.getsockname()[1]
        clients = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(BURST)]
        listening = _Listening(watched, clients, closed, kept)

        def close_streams() -> None:
            # At once: a cancel at one's close would leave the rest open.
            for stream in [*listening.accepted, *clients]:
                stream.socket.close()

        stack.callback(close_streams)
        yield listening


async def test_a_burst_of_queued_connections_is_accepted_in_one_scheduler_pass() -> None:
    """A server sharing its run with many agents waits a long pass for each resumption: the
    connections queued when one is accepted are taken with it and handed out without a
    pass each, so a burst does not wait in the listen queue, one taken a pass, until its
    clients time out."""
    with trio.fail_after(REAL_DEADLINE):
        async with _listening() as listening:
            passes = _Passes(trio.lowlevel.current_task())
            trio.lowlevel.add_instrument(passes)
            try:
                for _ in range(BURST):
                    await listening.accept()
            finally:
                trio.lowlevel.remove_instrument(passes)
            assert (len(listening.accepted), passes.count) == (BURST, 1)
            # Each is a live connection to its own client.
            for index, client in enumerate(listening.clients):
                await client.send_all(b"%d" % index)
            received = [await stream.receive_some() for stream in listening.accepted]
            assert sorted(received) == [b"%d" % index for index in range(BURST)]


async def test_closing_the_listener_closes_the_connections_it_took_and_did_not_hand_out() -> None:
    """Connections taken with an accept but not yet handed out are closed with the
    listener: their clients read the end of the stream, not a connection left open."""
    with trio.fail_after(REAL_DEADLINE):
        async with _listening() as listening:
            await listening.accept()
            await listening.watched.aclose()
            # The first client is the one handed out, still open.
            for client in listening.clients[1:]:
                assert await client.receive_some() == b""


async def _interrupted_in_the_drain(
    listening: _Listening, monkeypatch: pytest.MonkeyPatch
) -> BaseException | None:
    """What an accept raises when Ctrl-C lands as its drain wraps the second connection it
    takes (trio's accept, which took the first of all, wraps its own otherwise)."""
    wrap = trio.socket.from_stdlib_socket
    calls: list[object] = []

    def interrupted(sock: socket.socket) -> trio.socket.SocketType:
        calls.append(sock)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return wrap(sock)

    monkeypatch.setattr(trio.socket, "from_stdlib_socket", interrupted)
    try:
        await listening.accept()
    # Caught whole: a Ctrl-C reaching pytest would end the run.
    except BaseException as exc:
        return exc
    finally:
        monkeypatch.undo()
    return None


async def test_ctrl_c_landing_as_queued_connections_are_taken_is_kept_and_closes_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C landing while an accept takes the connections queued beside its own is kept
    for the server's caller, as one landing in trio's accept is, and the connection trio
    accepted and the one the Ctrl-C landed on are closed, not left open unhanded."""
    with trio.fail_after(REAL_DEADLINE):
        async with _listening() as listening:
            raised = await _interrupted_in_the_drain(listening, monkeypatch)
            assert type(raised) is KeyboardInterrupt
            assert listening.kept == [raised]
            # Trio's, the first client's; the third's, which the Ctrl-C landed on.
            assert await listening.clients[0].receive_some() == b""
            assert await listening.clients[2].receive_some() == b""


async def test_an_accept_out_of_descriptors_waits_for_a_connection_to_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An accept whose drain ran out of descriptors makes the next one wait for a connection
    to close before trio's accept, which would meet the limit at once (trio logging the
    error and pausing, a burst served at a fraction of the pace it is without the drain)."""
    starved = [True]
    take = socket.socket.accept

    def accept(sock: socket.socket) -> tuple[socket.socket, object]:
        # The drain's own accept: trio's calls the stdlib's through a reference of its own.
        if starved[0]:
            raise OSError(errno.EMFILE, "Too many open files")
        return take(sock)

    monkeypatch.setattr(socket.socket, "accept", accept)
    # Only a wake-up ends the wait within the test's deadline.
    monkeypatch.setattr(_interrupts, "STARVED_WAIT", 10 * REAL_DEADLINE)
    with trio.fail_after(REAL_DEADLINE):
        async with _listening() as listening:
            await listening.accept()
            trio_accept = listening.watched._listener.accept
            calls: list[None] = []

            async def counted() -> trio.SocketStream:
                calls.append(None)
                return await trio_accept()

            monkeypatch.setattr(listening.watched._listener, "accept", counted)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(listening.accept)
                await trio.testing.wait_all_tasks_blocked()
                assert (len(listening.accepted), calls) == (1, [])  # parked
                starved[0] = False
                listening.closed.unpark_all()
            assert (len(listening.accepted), calls) == (2, [None])
