"""Response feedback: adapters report response headers, and requests a cancel ended before
they were sent, to whoever listens in this context."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["ResponseListener", "listening", "report_response", "report_unsent"]

ResponseListener = Callable[[Mapping[str, str]], None]
"""Receives the headers of each successful provider response (rate-limit feedback)."""

_listener: ContextVar[ResponseListener | None] = ContextVar(
    "retinue_response_listener", default=None
)
_unsent_listener: ContextVar[Callable[[], None] | None] = ContextVar(
    "retinue_unsent_listener", default=None
)


@contextmanager
def listening(
    listener: ResponseListener | None, *, on_unsent: Callable[[], None] | None = None
) -> Iterator[None]:
    """Route :func:`report_response` calls made in this context to *listener*, and
    :func:`report_unsent` calls to *on_unsent*."""
    token = _listener.set(listener)
    unsent_token = _unsent_listener.set(on_unsent)
    try:
        yield
    finally:
        _unsent_listener.reset(unsent_token)
        _listener.reset(token)


def report_response(headers: Mapping[str, str]) -> None:
    """Give a response's headers to the listener of the current context, if any; never blocks."""
    listener = _listener.get()
    if listener is not None:
        listener(headers)


def report_unsent() -> None:
    """Say that the request being sent in this context was ended (cancelled) before it was
    written whole, with no response: its provider has no request to act on; never blocks."""
    listener = _unsent_listener.get()
    if listener is not None:
        listener()
