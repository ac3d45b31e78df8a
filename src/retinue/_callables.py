"""What kind of callable an object is, read as the runtime will call it."""

from __future__ import annotations

import functools
import inspect

from retinue._naming import qualified_name

__all__ = ["check_callable", "is_async", "is_generator"]


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


def check_callable(fn: object, what: str, *, synchronous: bool) -> None:
    """Refuse *fn*, given as one of *what* (``"watchers"``), unless the runtime can call it
    as it will: callable, no generator function, and not async if *synchronous*.

    Raises:
        TypeError: naming *fn* by its code (or a value that is no callable by its type).
    """
    if not callable(fn):
        # Its type, not its repr: an object's repr may show what it holds, a credential say.
        raise TypeError(f"{what} must be callable, got a value of type {type(fn).__qualname__}")
    # Named by the code alone, as a listener's errors name it: a partial's repr shows
    # its arguments, which may hold a credential.
    if is_generator(fn):
        # Called, it only makes a generator, which the bus drops: the body would
        # never run, and nothing would say so (trio refuses one to start_soon too).
        raise TypeError(
            f"{what} are called, not iterated: {qualified_name(fn)} is a generator function"
        )
    if synchronous and is_async(fn):
        raise TypeError(f"{what} are called synchronously: {qualified_name(fn)} is async")
