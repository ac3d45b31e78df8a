"""How deep a recursive record's conversion goes: refused, naming the limit, before Python's.

A recursive record converts by calling its own conversion, four to eight Python
frames per level of the value (more under a union or a Predicate), and Python
refuses a thread more than its recursion limit of frames (1000). Rather than fail
somewhere below with a ``RecursionError`` and a path kilobytes long, a conversion
counts the records it is inside and refuses one nested past
:data:`MAX_NESTED_RECORDS`, naming the limit. Every conversion runs on the thread
that binds the call (the trio thread, for the model's calls), user code in the
records (``__post_init__``, validators, Predicates) included.
"""

from __future__ import annotations

import threading

from ._located import Coerce, NestedTooDeeplyError

__all__ = ["MAX_NESTED_RECORDS", "nested"]

MAX_NESTED_RECORDS = 100
"""Records of a recursive schema one argument may hold inside one another: deep enough for
any tree a model writes, and within Python's recursion limit under the trio run's frames."""


class _Nesting(threading.local):
    """The records the conversion running on this thread is inside."""

    depth = 0


_NESTING = _Nesting()


def nested(convert: Coerce, value: object) -> object:
    """*convert* (a record's conversion) of *value*, one record further in."""
    nesting = _NESTING
    depth = nesting.depth
    if depth >= MAX_NESTED_RECORDS:
        raise NestedTooDeeplyError(f"more than {MAX_NESTED_RECORDS} records inside one another")
    nesting.depth = depth + 1
    try:
        return convert(value)
    finally:
        nesting.depth = depth
