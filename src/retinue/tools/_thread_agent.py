"""The agent handle a sync tool body sees: every use of it runs on the trio thread."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import final

import trio

from retinue.session import Session

__all__ = ["ThreadAgent"]


@final
class ThreadAgent:
    """Stands in for an agent handle (or its session) inside a sync tool body's worker thread.

    The handle's verbs append to the session and wake observers and
    subscribers; from a worker thread that corrupts trio's state. Each
    attribute read and method call is run on the trio thread instead, and the
    worker blocks until it returns; a session read from the handle is wrapped
    the same way, as its appends notify the same observers. Async methods are
    refused: a sync body cannot await them.
    """

    __slots__ = ("_target", "_token")

    def __init__(self, target: object, token: trio.lowlevel.TrioToken) -> None:
        self._target = target
        self._token = token

    def __getattr__(self, name: str) -> object:
        value = self._on_trio(getattr, self._target, name)
        if inspect.iscoroutinefunction(value):
            return functools.partial(_refuse_async, name)
        if inspect.isroutine(value):
            return functools.partial(self._on_trio, value)
        return value

    def _on_trio(self, fn: Callable[..., object], /, *args: object, **kwargs: object) -> object:
        if trio.lowlevel.in_trio_run():
            # Already on the trio thread (the context was kept past the body).
            return fn(*args, **kwargs)
        # With the token given, it also works from a thread the body started itself.
        value = trio.from_thread.run_sync(
            functools.partial(fn, *args, **kwargs), trio_token=self._token
        )
        return ThreadAgent(value, self._token) if isinstance(value, Session) else value

    def __repr__(self) -> str:
        return f"<ThreadAgent for {self._target!r}>"


def _refuse_async(name: str, *_args: object, **_kwargs: object) -> object:
    raise TypeError(
        f"agent.{name} is async and a sync tool body cannot await it: make the tool async"
    )
