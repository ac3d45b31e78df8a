"""A conversion nested deeper than one thread's stack holds: the rest goes on in another.

A recursive record converts by calling its own conversion, four to eight Python
frames per level of the value (more under a union, whose member test runs on top),
and Python refuses a thread more than its recursion limit of frames (1000): the 200
levels of :data:`MAX_JSON_DEPTH` need more. So a conversion counts the records it has
entered on the current thread's stack, and after :data:`RECORDS_PER_STACK` of them
converts the next one in a new thread, whose stack starts empty, while this one
waits: the same conversion, each part converted once, in order. A call's arguments
are converted on the trio thread, which waits as it would for the conversion itself.

A value nested more than :data:`MAX_JSON_DEPTH` levels, which no tool call carries
(the arguments are refused before), is refused here too, so the threads waiting on
one another stay few.
"""

from __future__ import annotations

import contextvars
import threading

from retinue._lossless import MAX_JSON_DEPTH

from ._located import Coerce, NestedTooDeeplyError

__all__ = ["RECORDS_PER_STACK", "nested"]

RECORDS_PER_STACK = 40
"""Records one thread's stack enters before the next goes on in a thread of its own."""


class _Nesting(threading.local):
    """The records entered on this thread's stack, and on those of the threads waiting for it."""

    here = 0
    below = 0


_NESTING = _Nesting()


def nested(convert: Coerce, value: object) -> object:
    """*convert* (a record's conversion) of *value*, one level further in.

    Each record at least one JSON level below the record holding it, and the first
    below the arguments' object: the :data:`MAX_JSON_DEPTH`-th is past the limit.
    """
    nesting = _NESTING
    here = nesting.here
    if here + nesting.below >= MAX_JSON_DEPTH:
        raise NestedTooDeeplyError
    if here == RECORDS_PER_STACK:
        return _on_new_stack(convert, value, nesting.below + here)
    nesting.here = here + 1
    try:
        return convert(value)
    finally:
        nesting.here = here


def _on_new_stack(convert: Coerce, value: object, below: int) -> object:
    # The unions' refusals and judgements, in a context variable, go along with it.
    context = contextvars.copy_context()
    outcome: list[tuple[object, BaseException | None]] = []

    def run() -> None:
        _NESTING.below = below
        try:
            outcome.append((context.run(nested, convert, value), None))
        except BaseException as exc:  # raised again in the thread that waits for it
            outcome.append((None, exc))

    worker = threading.Thread(target=run, name="retinue deep conversion", daemon=True)
    worker.start()
    worker.join()
    converted, failure = outcome[0]
    if failure is not None:
        raise failure
    return converted
