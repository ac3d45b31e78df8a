"""The agent handle a sync tool body sees: every use of it runs on the trio thread."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import final

import trio

__all__ = ["ThreadAgent"]


@final
class ThreadAgent:
    """Stands in for an agent handle inside a sync tool body's worker thread.

    The handle's verbs append to the session and wake observers and
    subscribers; from a worker thread that corrupts trio's state. Each
    attribute read and method call is run on the trio thread instead, and the
    worker blocks until it returns. Async methods are refused: a sync body
    cannot await them.
    """

    __slots__ = ("_agent", "_token")

    def __init__(self, agent: object, token: trio.lowlevel.TrioToken) -> None:
        self._agent = agent
        self._token = token

    def __getattr__(self, name: str) -> object:
        value = self._on_trio(getattr, self._agent, name)
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
        return trio.from_thread.run_sync(
            functools.partial(fn, *args, **kwargs), trio_token=self._token
        )

    def __repr__(self) -> str:
        return f"<ThreadAgent for {self._agent!r}>"


def _refuse_async(name: str, *_args: object, **_kwargs: object) -> object:
    raise TypeError(
        f"agent.{name} is async and a sync tool body cannot await it: make the tool async"
    )
