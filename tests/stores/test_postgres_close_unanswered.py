"""PostgresStore's close returns though the server stops answering a lock connection the store
is remaking: the statements that set it up are ended, not waited for."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import trio

from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import run_turn
from tests.stores._postgres_locks_kit import backend_of, drop_lock_connection

pytestmark = pytest.mark.postgres

_CLOSE_SECONDS = 10.0


class _Forwarder:
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
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)  # the end of what one side sends reaches the other

    def close(self) -> None:
        self._closed.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join()


async def test_postgres_close_ends_a_remade_lock_connection_the_server_does_not_answer(
    postgres_schema: tuple[str, str],
) -> None:
    """The server drops the lock connection of a store holding a claim; the one its watcher
    makes in its place is answered no more once connected. The store's close returns within
    seconds, its watcher ended, rather than wait for the server."""
    dsn, schema = postgres_schema
    forwarder = _Forwarder(dsn)
    try:
        async with PostgresStore(forwarder.dsn, schema=schema) as store:
            session = Session.create("live")
            store.attach_new(session)
            run_turn(session)
            await store.flush(session)
            claims = backend_of(store)._claims
            connect = claims._connect

            def connect_then_mute(**params: Any) -> Any:
                conn = connect(**params)
                forwarder.muted.set()
                return conn

            claims._connect = connect_then_mute
            drop_lock_connection(dsn, store)
            assert await trio.to_thread.run_sync(forwarder.muted.wait, _CLOSE_SECONDS)
            await trio.sleep(0.5)  # the watcher sends its first statement, unanswered
            started = time.monotonic()
            try:
                with trio.fail_after(_CLOSE_SECONDS):
                    await trio.to_thread.run_sync(backend_of(store).close, abandon_on_cancel=True)
            finally:
                forwarder.close()  # else a close still waiting would hold up the store's exit
            assert time.monotonic() - started < _CLOSE_SECONDS
            assert not any(t.name == "retinue-postgres-claims" for t in threading.enumerate())
    finally:
        forwarder.close()
