"""Response feedback: adapters report response headers to whoever listens in this context."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["ResponseListener", "listening", "report_response"]

ResponseListener = Callable[[Mapping[str, str]], None]
"""Receives the headers of each successful provider response (rate-limit feedback)."""

_listener: ContextVar[ResponseListener | None] = ContextVar(
    "retinue_response_listener", default=None
)


@contextmanager
def listening(listener: ResponseListener | None) -> Iterator[None]:
    """Route :func:`report_response` calls made in this context to *listener*."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def report_response(headers: Mapping[str, str]) -> None:
    """Give a response's headers to the listener of the current context, if any; never blocks."""
    listener = _listener.get()
    if listener is not None:
        listener(headers)
