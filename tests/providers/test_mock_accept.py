"""The mock server's listener takes a burst of connections in one scheduler pass."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

from retinue.providers.mock._interrupts import WatchedListener

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


async def _listening(
    closed: trio.lowlevel.ParkingLot | None = None,
    kept: list[KeyboardInterrupt] | None = None,
) -> tuple[WatchedListener, list[trio.SocketStream]]:
    """A watched listener with BURST client connections queued on it."""
    [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listener.socket.getsockname()[1]
    clients = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(BURST)]
    keep = (kept if kept is not None else []).append
    return WatchedListener(listener, keep, closed or trio.lowlevel.ParkingLot()), clients


async def test_a_burst_of_queued_connections_is_accepted_in_one_scheduler_pass() -> None:
    """A server sharing its run with many agents waits a long pass for each resumption: the
    connections queued when one is accepted are taken with it and handed out without a
    pass each, where each took one and a burst waited in the listen queue until its
    clients timed out."""
    with trio.fail_after(REAL_DEADLINE):
        watched, clients = await _listening()
        passes = _Passes(trio.lowlevel.current_task())
        trio.lowlevel.add_instrument(passes)
        try:
            accepted = [await watched.accept() for _ in range(BURST)]
        finally:
            trio.lowlevel.remove_instrument(passes)
        assert (len(accepted), passes.count) == (BURST, 1)
        # Each is a live connection to its own client.
        for index, client in enumerate(clients):
            await client.send_all(b"%d" % index)
        assert sorted([await stream.receive_some() for stream in accepted]) == [
            b"%d" % index for index in range(BURST)
        ]
        for stream in [*accepted, *clients]:
            await stream.aclose()
        await watched.aclose()


async def test_closing_the_listener_closes_the_connections_it_took_and_did_not_hand_out() -> None:
    """Connections taken with an accept but not yet handed out are closed with the
    listener: their clients read the end of the stream, not a connection left open."""
    with trio.fail_after(REAL_DEADLINE):
        watched, clients = await _listening()
        first = await watched.accept()
        await watched.aclose()
        await first.aclose()
        for client in clients[1:]:
            assert await client.receive_some() == b""
            await client.aclose()
        await clients[0].aclose()


async def _interrupted_in_the_drain(
    watched: WatchedListener, monkeypatch: pytest.MonkeyPatch
) -> BaseException | None:
    """What an accept raises when Ctrl-C lands as its drain wraps a queued connection.

    Trio's accept wraps the connection it takes the same way, first.
    """
    wrap = trio.socket.from_stdlib_socket
    calls: list[object] = []

    def interrupted(sock: object) -> object:
        calls.append(sock)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return wrap(sock)  # type: ignore[arg-type]

    monkeypatch.setattr(trio.socket, "from_stdlib_socket", interrupted)
    try:
        await watched.accept()
    # Caught whole: a Ctrl-C reaching pytest would end the run.
    except BaseException as exc:
        return exc
    finally:
        monkeypatch.undo()
    return None


async def test_ctrl_c_landing_as_queued_connections_are_taken_is_kept_and_closes_the_taken_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C landing while an accept takes the connections queued beside its own is kept
    for the server's caller, as one landing in trio's accept is, and the connection trio
    accepted is closed, not left open unhanded: it went out unkept, that one left open."""
    kept: list[KeyboardInterrupt] = []
    with trio.fail_after(REAL_DEADLINE):
        watched, clients = await _listening(kept=kept)
        raised = await _interrupted_in_the_drain(watched, monkeypatch)
        assert type(raised) is KeyboardInterrupt
        assert kept == [raised]
        # The first client's connection, trio's, is closed: it reads the end of the stream.
        assert await clients[0].receive_some() == b""
        for client in clients:
            await client.aclose()
        await watched.aclose()


@contextmanager
def _descriptors_left(count: int) -> Iterator[None]:
    """Let this process open *count* more descriptors, and no more, until the block ends."""
    fillers: list[int] = []
    top = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    # Below the top every free number is filled: the next ones opened are above it.
    while (fd := os.open(os.devnull, os.O_RDONLY)) < top:
        fillers.append(fd)
    os.close(fd)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (top + 1 + count, limits[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        for fd in fillers:
            os.close(fd)


async def test_an_accept_out_of_descriptors_waits_for_a_connection_to_close() -> None:
    """An accept whose drain ran out of descriptors makes the next one wait for a connection
    to close before trio's accept, where that met the limit at once (trio logging the error
    and pausing, a burst served at a fraction of the pace it was without the drain)."""
    closed = trio.lowlevel.ParkingLot()
    with trio.fail_after(REAL_DEADLINE):
        watched, clients = await _listening(closed)
        with _descriptors_left(2):
            accepted = [await watched.accept(), await watched.accept()]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_accept_into, watched, accepted)
                await trio.testing.wait_all_tasks_blocked()
                assert len(accepted) == 2  # parked: no descriptor is free
                await accepted[0].aclose()
                closed.unpark_all()
        assert len(accepted) == 3
        for stream in [*accepted[1:], *clients]:
            await stream.aclose()
        await watched.aclose()


async def _accept_into(watched: WatchedListener, accepted: list[trio.SocketStream]) -> None:
    accepted.append(await watched.accept())
