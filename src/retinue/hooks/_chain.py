"""The middleware chain a waterfall dispatch runs (R6.3): each listener's ``next()``."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import TypeVar

from retinue._errors import HookError

from ._calls import a_listener_of, call
from ._results import Takes, invalid_result
from ._seams import Listener

__all__ = ["run_chain"]

T = TypeVar("T")


class _Frame:
    """One listener's call in a waterfall: what its ``next()`` returned, whether it is over."""

    __slots__ = ("done", "next_call")

    def __init__(self) -> None:
        self.next_call: Coroutine[object, object, object] | None = None
        self.done = False


def _close_unawaited(next_call: Coroutine[object, object, object] | None) -> bool:
    """Close what a listener's ``next()`` returned if it was never awaited; whether it was.

    Closed, Python does not warn of a coroutine of the bus's own never awaited.
    """
    if next_call is None or inspect.getcoroutinestate(next_call) != inspect.CORO_CREATED:
        return False
    next_call.close()
    return True


def _late_next(name: str) -> HookError:
    return HookError(
        f"{a_listener_of(name)} called next() after the listener returned: "
        "the dispatch is over, so the rest of the chain cannot run"
    )


async def run_chain(
    name: str,
    chain: list[Listener],
    default: Callable[[], Awaitable[T]],
    args: tuple[object, ...],
    takes: Takes | None,
) -> T:
    """Run *chain*, the first listener outermost, each called as ``fn(*args, next)``.

    ``await next()`` runs the rest of the chain, ending in *default*. Each
    listener's result is checked with *takes* as it returns: one its seam does
    not take is raised as a ``HookError`` from where the listener returned.
    """

    async def run(index: int, caller: _Frame | None) -> T:
        # A next() coroutine made in time but awaited after its listener's
        # call ended would run the rest of the chain outside any dispatch.
        if caller is not None and caller.done:
            raise _late_next(name)
        if index == len(chain):
            return await default()
        frame = _Frame()

        def call_next() -> Awaitable[T]:
            # Once, and only while the listener's call lasts: running the
            # rest of the chain twice, or after the dispatch, would run a
            # tool twice or outside its call.
            if frame.done:
                raise _late_next(name)
            if frame.next_call is not None:
                raise HookError(f"{a_listener_of(name)} called next() more than once")
            frame.next_call = rest = run(index + 1, frame)
            return rest

        try:
            result = await call(name, chain[index], *args, call_next)
        finally:
            frame.done = True
            unawaited = _close_unawaited(frame.next_call)
        if unawaited:
            # Returned (``return call_next()``) or dropped: either way the rest of
            # the chain was asked for and never ran.
            raise HookError(
                f"{a_listener_of(name)} called next() but never awaited what it returned: "
                "write return await call_next()"
            )
        if takes is not None and not takes[0](result):
            raise invalid_result(name, chain[index], result, takes[1])
        return result  # type: ignore[return-value]

    return await run(0, None)
