"""The agent handle a sync tool body sees: every use of it runs on the trio thread."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import final

import attrs
import trio

from retinue._errors import AgentError
from retinue.session import Session

__all__ = ["CALL_ENDED", "ThreadAgent", "ThreadCall", "end_thread_call"]

CALL_ENDED = "CALL_ENDED"


@final
@attrs.define(eq=False)
class ThreadCall:
    """The call a sync body runs for, live until its awaiting task leaves the thread.

    A body abandoned at its timeout or a cancel runs on in its thread after its
    call is answered; what it then does to the agent would land in a later turn,
    unrelated to the call (R2.25, R9.20), so once ``ended``, every method of its
    stand-in handle is refused. The check runs on the trio thread, where the
    call also ends, so a verb either runs whole before the end or not at all.
    """

    tool: str
    call_id: str
    ended: bool = attrs.field(default=False, init=False)

    def run(
        self, verb: str, fn: Callable[..., object], /, *args: object, **kwargs: object
    ) -> object:
        """*fn*'s call on the trio thread, or ``AgentError`` coded ``CALL_ENDED`` once ended."""
        if self.ended:
            raise self.refusal(verb)
        return fn(*args, **kwargs)

    def refusal(self, verb: str) -> AgentError:
        """The error of *verb* used once the call has ended."""
        return AgentError(
            f'{verb} refused: call "{self.call_id}" of tool "{self.tool}" has ended '
            "(answered, cancelled or timed out), and the handle its sync body was given "
            "acts on the agent only while the call lasts",
            code=CALL_ENDED,
        )


@final
class ThreadAgent:
    """Stands in for an agent handle (or its session) inside a sync tool body's worker thread.

    The handle's verbs append to the session and wake observers and
    subscribers; from a worker thread that corrupts trio's state. Each
    attribute read and method call is run on the trio thread instead, and the
    worker blocks until it returns; a session read from the handle is wrapped
    the same way, as its appends notify the same observers. Async methods are
    refused: a sync body cannot await them.

    It serves one call (*call*): once that has ended, its methods, and those of
    the sessions it handed out, raise ``AgentError`` coded ``CALL_ENDED``
    without reaching the agent, as an async body cannot act once its call is
    cancelled; on the trio thread too (a context kept past its body), and once
    the trio run is over. Attribute reads (``id``, ``status``, ``session``)
    still answer while the run lasts: they change nothing.
    """

    __slots__ = ("_call", "_target", "_token")

    def __init__(self, target: object, token: trio.lowlevel.TrioToken, call: ThreadCall) -> None:
        self._target = target
        self._token = token
        self._call = call

    def __getattr__(self, name: str) -> object:
        verb = f"{'session' if isinstance(self._target, Session) else 'agent'}.{name}"
        value = self._on_trio(verb, getattr, self._target, name)
        if inspect.iscoroutinefunction(value):
            return functools.partial(_refuse_async, name)
        if inspect.isroutine(value):
            return functools.partial(self._on_trio, verb, self._call.run, verb, value)
        return value

    def _on_trio(
        self, verb: str, fn: Callable[..., object], /, *args: object, **kwargs: object
    ) -> object:
        if trio.lowlevel.in_trio_run():
            if trio.lowlevel.current_trio_token() is self._token:
                # Already on the trio thread: a context kept past the body is used there.
                return fn(*args, **kwargs)
            # A trio.run the body started in its own thread: run here, the verb would touch
            # the agent off the runtime's thread, and trio cannot hop to it from a run.
            raise RuntimeError(
                f"{verb} was used inside a trio.run of the tool body's own, which cannot "
                "reach the runtime's trio thread: use it outside that run, or make the tool "
                "async and call it there"
            )
        try:
            # With the token given, it also works from a thread the body started itself.
            value = trio.from_thread.run_sync(
                functools.partial(fn, *args, **kwargs), trio_token=self._token
            )
        except trio.RunFinishedError as exc:
            # The runtime's run is over, and with it every call: refused as after its end.
            if self._call.ended:
                raise self._call.refusal(verb) from exc
            raise
        return ThreadAgent(value, self._token, self._call) if isinstance(value, Session) else value

    def __repr__(self) -> str:
        return f"<ThreadAgent for {self._target!r}>"


def end_thread_call(handle: object) -> None:
    """End the call of *handle*, a sync body's stand-in (anything else is left alone)."""
    if isinstance(handle, ThreadAgent):
        handle._call.ended = True


def _refuse_async(name: str, *_args: object, **_kwargs: object) -> object:
    raise TypeError(
        f"agent.{name} is async and a sync tool body cannot await it: make the tool async"
    )
