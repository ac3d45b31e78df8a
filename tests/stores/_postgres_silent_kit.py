"""A TCP forwarder to the PostgreSQL server that can stop passing on what clients send: a
server that stops answering while the network still acknowledges every packet."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import trio


class Forwarder:
    """A TCP forwarder to the server of *dsn* that stops passing on what clients send once
    :attr:`muted` is set, the connections kept open: a server that stops answering."""

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        self.dsn = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))
        self.muted = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = [self._listener]
        self._threads = [threading.Thread(target=self._accept)]
        self._threads[0].start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._target)
                self._sockets += [client, server]
                for pipe in (
                    threading.Thread(target=self._pipe, args=(client, server, self.muted)),
                    threading.Thread(target=self._pipe, args=(server, client, None)),
                ):
                    self._threads.append(pipe)
                    pipe.start()

    def _pipe(self, source: socket.socket, sink: socket.socket, mute: Any) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                while mute is not None and mute.is_set() and not self._closed.is_set():
                    self._closed.wait(0.05)
                if mute is not None and mute.is_set():
                    # Closed while muted: what the server never got, it never gets. Sent on
                    # here, it could reach the server before close shut that socket, and
                    # its answer the client, a statement "left unanswered" answered.
                    return
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)  # the end of what one side sends reaches the other

    def close(self) -> None:
        """Cut every connection: a statement still waiting for the server fails."""
        self._closed.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join()


async def cut_after(forwarder: Forwarder, seconds: float) -> None:
    """Close *forwarder* after *seconds* of real time: a close still waiting for the server
    then fails, so that a test of it fails rather than hangs."""
    await trio.sleep(seconds)
    await trio.to_thread.run_sync(forwarder.close)
