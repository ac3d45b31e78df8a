"""The middleware chain a waterfall dispatch runs (R6.3): each listener's ``next()``."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import TypeVar

from retinue._errors import HookError

from ._calls import listener_label, raise_failure
from ._results import Takes, refusal
from ._seams import Listener

__all__ = ["run_chain"]

T = TypeVar("T")


class _Frame:
    """One listener's call in a waterfall: its ``next()``, what that returned, whether it is over."""

    __slots__ = ("done", "index", "listener", "name", "next_call", "passed_up", "run")

    def __init__(
        self,
        name: str,
        listener: Listener,
        run: Callable[[int, _Frame], Coroutine[object, object, object]],
        index: int,
    ) -> None:
        self.name = name
        self.listener = listener
        # The chain's runner and where the rest of it starts: next() runs run(index, self).
        self.run = run
        self.index = index
        self.next_call: Coroutine[object, object, object] | None = None
        self.done = False
        self.passed_up: BaseException | None = None
        """What the rest of the chain raised out of ``next()``: the listener's
        failure if it lets it through, but not one it raised."""

    @property
    def label(self) -> str:
        """The listener as errors name it: built only for an error."""
        return listener_label(self.name, self.listener)

    def call_next(self) -> Awaitable[object]:
        """The listener's ``next()``: the rest of the chain, to await.

        Once, and only while the listener's call lasts: running the rest of the
        chain twice, or after the dispatch, would run a tool twice or outside its call.
        """
        if self.done:
            raise _late_next(self.label)
        if self.next_call is not None:
            raise HookError(f"{self.label} called next() more than once")
        self.next_call = rest = self.run(self.index, self)
        return rest

    def end(self) -> bool:
        """Mark the listener's call over; whether it asked for ``next()`` and never awaited it.

        What it never awaited is closed, so Python does not warn of a coroutine
        of the bus's own never awaited.
        """
        self.done = True
        next_call = self.next_call
        if next_call is None or inspect.getcoroutinestate(next_call) != inspect.CORO_CREATED:
            return False
        next_call.close()
        return True


def _late_next(label: str) -> HookError:
    return HookError(
        f"{label} called next() after the listener returned: "
        "the dispatch is over, so the rest of the chain cannot run"
    )


def _unawaited_next(label: str) -> HookError:
    # Returned (``return call_next()``) or dropped: either way the rest of the
    # chain was asked for and never ran.
    return HookError(
        f"{label} called next() but never awaited what it returned: write return await call_next()"
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
        try:
            # A next() coroutine made in time but awaited after its listener's
            # call ended would run the rest of the chain outside any dispatch.
            if caller is not None and caller.done:
                raise _late_next(caller.label)
            if index == len(chain):
                return await default()
            listener = chain[index]
            frame = _Frame(name, listener, run, index + 1)
            # call()'s work written out: its coroutine would be one more frame per listener
            # of a chain that nests, a third of the depth Python's recursion limit allows.
            try:
                result = listener(*args, frame.call_next)
                if inspect.isawaitable(result):
                    result = await result
            except BaseException as exc:
                raise_failure(frame.label, exc, passed_on=exc is frame.passed_up)
            finally:
                unawaited = frame.end()
            if unawaited:
                raise _unawaited_next(frame.label)
            if takes is not None and not takes.accepts(result):
                raise refusal(name, listener, result, takes)
            return result  # type: ignore[return-value]  # noqa: ASYNC910 - a synchronous listener: as call()
        except BaseException as exc:
            if caller is not None:  # what the caller's listener passes on, if it does
                caller.passed_up = exc
            raise

    return await run(0, None)
