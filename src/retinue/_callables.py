"""What kind of callable an object is, read as the runtime will call it."""

from __future__ import annotations

import functools
import inspect

__all__ = ["is_async", "is_generator"]


def is_async(fn: object) -> bool:
    """Whether *fn* is an ``async def`` function or method, or an object whose ``__call__`` is.

    Through partials. An object that marks itself a coroutine function (as
    ``unittest.mock.AsyncMock`` does) is async too, though its class's
    ``__call__`` is not. A sync function wrapping an async one is not: it may
    well start it in a nursery and return.
    """
    fn = _unwrapped(fn)
    if inspect.iscoroutinefunction(fn):
        return True
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


def is_generator(fn: object) -> bool:
    """Whether *fn* is a generator function (``yield`` in a ``def`` or an ``async def``),
    or an object whose ``__call__`` is one; through partials."""
    fn = _unwrapped(fn)
    called = fn if inspect.isroutine(fn) else type(fn).__call__
    return inspect.isgeneratorfunction(called) or inspect.isasyncgenfunction(called)


def _unwrapped(fn: object) -> object:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn
