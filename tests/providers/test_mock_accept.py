"""The mock server's listener takes a burst of connections in one scheduler pass."""

from __future__ import annotations

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


async def _listening() -> tuple[WatchedListener, list[trio.SocketStream]]:
    """A watched listener with BURST client connections queued on it."""
    [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listener.socket.getsockname()[1]
    clients = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(BURST)]
    return WatchedListener(listener, lambda _interrupt: None), clients


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
