"""How a run ends when Ctrl-C or a ``SystemExit`` lands in one of its tasks: raised bare."""

from __future__ import annotations

from typing import NoReturn

__all__ = ["holds_interrupt", "lone_ending", "reraise"]

_ENDINGS = (KeyboardInterrupt, SystemExit)


def lone_ending(
    group: BaseExceptionGroup[BaseException], body_error: BaseException | None
) -> BaseException | None:
    """The Ctrl-C (else the ``SystemExit``) to raise when *group* holds nothing else,
    wherever it landed.

    *group* is what a nursery raised, its ``Cancelled`` split out; *body_error* what
    the body it guards raised, if anything. Trio raises Ctrl-C in whatever task runs
    when it comes: an agent's tool or listener, or a server's connection, as much as
    the body. Landing in such a task, it reaches the nursery through the task's own,
    one group inside another, which an ``except KeyboardInterrupt`` does not catch.
    A ``SystemExit`` that ends the run (the body's, a mock server policy's) comes out
    so too: inside a group, Python exits with a traceback and status 1, not the
    status it carries. Ctrl-C beside it is the user's, and wins.
    """
    if group.split(_ENDINGS)[1] is not None:
        return None
    interrupts = group.split(KeyboardInterrupt)[0]
    if interrupts is None:
        # The body's own ending, Ctrl-C above all (in a group of its own too), beside
        # the group's SystemExits.
        if isinstance(body_error, SystemExit) or holds_interrupt(body_error):
            return body_error
        return _first_leaf(group)
    if isinstance(body_error, KeyboardInterrupt):
        return body_error
    return _first_leaf(interrupts)


def holds_interrupt(error: BaseException | None) -> bool:
    """Whether *error* is Ctrl-C, or a group holding one (landed in a task of a nursery)."""
    if isinstance(error, BaseExceptionGroup):
        return error.split(KeyboardInterrupt)[0] is not None
    return isinstance(error, KeyboardInterrupt)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


def reraise(error: BaseException) -> NoReturn:
    """Raise *error* again from an ``except`` block, keeping the ``__context__`` it had."""
    context = error.__context__
    try:
        raise error
    finally:
        # Raising in a handler chains the handled group as the context; undo that.
        error.__context__ = context
