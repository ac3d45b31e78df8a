"""A connection attempt given up (a deadline while the server does not answer) frees what it
held once it ends, without waiting for CPython's cyclic collector."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from typing import NoReturn

import pytest

from retinue.stores._pgschema import connect_cancellably

THREAD_NAME = "retinue-postgres-connect"
WAIT_SECONDS = 10.0
"""Real seconds a thread of the test may take to end (it ends at once)."""


class _Socket:
    """Stands for the socket a failed attempt's frames hold."""


class _GaveUpError(Exception):
    """The caller's deadline."""


@pytest.fixture
def no_cyclic_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _join_attempts() -> None:
    for thread in threading.enumerate():
        if thread.name == THREAD_NAME:
            thread.join(WAIT_SECONDS)
            assert not thread.is_alive()


def test_a_failed_attempt_given_up_frees_its_socket_as_it_ends(no_cyclic_collector: None) -> None:
    """The attempt outlives the caller that gave it up; when it fails at last (the connect
    timeout), its failure and the socket its frames hold go at once: nothing keeps them in
    a reference cycle for the collector."""
    held: list[weakref.ref[_Socket]] = []
    given_up = threading.Event()

    def connect() -> NoReturn:
        socket = _Socket()
        held.append(weakref.ref(socket))
        given_up.wait(WAIT_SECONDS)
        raise OSError("connection timed out")

    def give_up() -> NoReturn:
        raise _GaveUpError

    with pytest.raises(_GaveUpError):
        connect_cancellably(connect, give_up)
    given_up.set()
    _join_attempts()
    assert held[0]() is None


def test_a_failed_attempt_waited_for_frees_its_socket_with_its_failure(
    no_cyclic_collector: None,
) -> None:
    """An attempt that fails while its caller waits (a server down) raises its failure there;
    once the caller lets the failure go, what its frames held goes with it, without the
    collector: neither the attempt's frame nor the caller's keeps it in a cycle."""
    held: list[weakref.ref[_Socket]] = []

    def connect() -> NoReturn:
        socket = _Socket()
        held.append(weakref.ref(socket))
        raise OSError("connection refused")

    with pytest.raises(OSError, match="connection refused"):
        connect_cancellably(connect, lambda: None)
    _join_attempts()
    assert held[0]() is None
