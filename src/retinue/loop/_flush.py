"""The end-of-turn flush (R7.49): the durability checkpoint, shielded and bounded."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import attrs
import trio

from retinue._errors import (
    FAILURE_OF_TAKES,
    HookError,
    HookTimeoutError,
    StoreError,
    StoreTimeoutError,
    failure_of,
)

from ._core import FLUSHING, AgentCore

__all__ = ["FLUSH_TIMEOUT", "flush", "flush_shielded"]

log = logging.getLogger("retinue.loop")

# The two parts of the end-of-turn flush, as a timeout names them.
_STORE = "the store's flush"
_LISTENERS = "the session/flush listeners"

FLUSH_TIMEOUT = "FLUSH_TIMEOUT"
"""The code of an end-of-turn flush that ran past ``flush_timeout``, whichever part ran late
(the store and the listeners are peers of one durability checkpoint, R4.23). The class says
which: a ``StoreTimeoutError`` while the store's flush is unfinished, else a
``HookTimeoutError``."""


async def flush(core: AgentCore, turn: int, step: int) -> None:  # noqa: ASYNC910 - an in-memory commit needs no schedule point (the driver's mailbox wait follows); store.flush always checkpoints, and a checkpoint here could trip the scope's deadline
    """The durability checkpoint (R7.49): shielded, bounded, failures reported only."""
    services = core.services
    store = services.store
    # A store written before the protocol had ``durable`` takes the guarded path.
    durable = getattr(store, "durable", True)
    if not durable and not services.hooks.hears("session/flush", core.id):
        core.flushed_upto = len(core.session.events)
        # An in-memory store flushes without blocking and no cancel interrupts
        # it, so the shield and the deadline would guard nothing; committing
        # synchronously also spares a task switch per turn.
        # Looked up on the class: a wrapper that delegates through __getattr__
        # has its own flush awaited, never bypassed.
        flush_nowait = getattr(type(store), "flush_nowait", None)
        try:
            if flush_nowait is None or not flush_nowait(store, core.session):
                await store.flush(core.session)
        except FAILURE_OF_TAKES as exc:
            _flush_failed(core, turn, step, failure_of(exc, _STORE, StoreError))
            core.flush_failures += 1
        else:
            if core.flush_failures:
                _recovered(core)
        return  # noqa: ASYNC910 - the driver waits for its mailbox next, a schedule point every turn
    await flush_shielded(core, turn, step)


async def flush_shielded(core: AgentCore, turn: int, step: int) -> None:
    """:func:`flush`, shielded and bounded whatever the store.

    For a caller a cancel from outside (or Ctrl-C) is unwinding: there, any
    await outside the shield raises again, an in-memory store's too.
    """
    failures = core.flush_failures
    core.flushed_upto = len(core.session.events)
    timeout = core.services.flush_timeout  # seconds above 0, or math.inf for no bound
    parts = _Parts([_STORE])
    flushing = FLUSHING.set(core)
    try:
        caught = await _shielded_flush(core, turn, step, parts)
    finally:
        FLUSHING.reset(flushing)
    if caught:
        late = " and ".join(parts.unfinished)
        # An agent/error listener keeping a backup tells a store that holds the turn by this.
        error_class = StoreTimeoutError if _STORE in parts.unfinished else HookTimeoutError
        error = error_class(
            f"flush of session {core.id!r} timed out: {late} ran past {timeout:g}s",
            code=FLUSH_TIMEOUT,
        )
        _flush_failed(core, turn, step, error)
    if caught or parts.failed:
        core.flush_failures = failures + 1
    elif failures:
        _recovered(core)


@attrs.define
class _Parts:
    """What the parts of one flush came to: those not finished (all, at first), and
    whether one failed."""

    unfinished: list[str]
    failed: bool = False


async def _shielded_flush(core: AgentCore, turn: int, step: int, parts: _Parts) -> bool:
    """Run the store's flush and the session/flush listeners; whether the deadline ended them."""
    services = core.services
    store_flush = partial(services.store.flush, core.session)
    with trio.CancelScope(shield=True) as scope:
        scope.relative_deadline = services.flush_timeout
        if not services.hooks.hears("session/flush", core.id):
            await _flush_part(core, turn, step, parts, _STORE, store_flush)
        else:
            # The store's write and the session/flush listeners are peers of one
            # checkpoint (R4.23): concurrent under one deadline, and neither's
            # failure or slowness keeps the other from running.
            parts.unfinished.append(_LISTENERS)
            listeners = partial(
                services.hooks.parallel, "session/flush", core.agent, core.session, scope=core.id
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_flush_part, core, turn, step, parts, _STORE, store_flush)
                await _flush_part(core, turn, step, parts, _LISTENERS, listeners)
    return scope.cancelled_caught


async def _flush_part(  # noqa: ASYNC910 - the store's flush always checkpoints; the listeners' part runs only when one listens, in parallel's nursery
    core: AgentCore,
    turn: int,
    step: int,
    parts: _Parts,
    name: str,
    run: Callable[[], Awaitable[None]],
) -> None:
    """Run one part of the flush, reporting its failure; *name* leaves ``parts.unfinished``
    unless cancelled."""
    try:
        await run()
    except FAILURE_OF_TAKES as exc:
        core.services.end_on_interrupt(exc)  # a Ctrl-C in a group, passed on below
        # The flush's deadline is a real cancel: raised again, the caller reports it.
        kind = StoreError if name == _STORE else HookError
        parts.failed = True
        _flush_failed(core, turn, step, failure_of(exc, name, kind))
    except BaseException as exc:
        # A listener's Ctrl-C ends the runtime now, not once the store's write (in a
        # thread the cancel cannot stop) has ended beside it.
        core.services.end_on_interrupt(exc)
        raise
    parts.unfinished.remove(name)


def _flush_failed(core: AgentCore, turn: int, step: int, error: Exception) -> None:
    """A failed flush is reported, never raised (R7.49).

    Each failure (of the store's part or the listeners', or the deadline) is an
    ``agent/error``. The log warns of those of the first failed flush of a run and then of
    the 10th, 100th, ... (the others are debug records): a store that is down fails every
    turn of every agent until it is back. The flush that ends the run is a warning too, so
    a reader of the warnings sees when it ended. The flush counts itself once it is over.
    """
    failures = core.flush_failures + 1
    level = logging.WARNING if _is_power_of_ten(failures) else logging.DEBUG
    if failures == 1:
        log.log(level, "flush of session %s failed: %s", core.id, error)
    else:
        log.log(
            level,
            "flush of session %s failed (%d failed flushes in a row): %s",
            core.id,
            failures,
            error,
        )
    core.emit("agent/error", turn, step, error)


def _is_power_of_ten(count: int) -> bool:
    """Whether *count*, 1 or more, is 1, 10, 100, ..."""
    while count % 10 == 0:
        count //= 10
    return count == 1


def _recovered(core: AgentCore) -> None:
    """Log the flush that ends a run of failed ones, and start counting anew."""
    log.warning(
        "flush of session %s succeeded again (failed before: %d)", core.id, core.flush_failures
    )
    core.flush_failures = 0
