"""The ``source_event_seqs`` of an event: what an append accepts (R4.22)."""

from __future__ import annotations

from collections.abc import Sequence

from retinue._errors import SessionError
from retinue._lossless import shown

__all__ = ["as_sources", "check_sources", "checked_sources"]

_INT_ONLY = {int}


def as_sources(value: Sequence[int]) -> tuple[int, ...]:
    """*value* as a tuple; a non-iterable is refused like any invalid source (R4.22)."""
    try:
        return tuple(value)
    except TypeError:
        raise SessionError(
            f"source_event_seqs must be a sequence of seqs, got {shown(value)}",
            code="INVALID_SOURCES",
        ) from None


def check_sources(kind: str, sources: tuple[int, ...], seq: int) -> None:
    """Refuse *sources* of the *kind* event at *seq* unless they are valid (R4.22).

    Valid: integers, non-empty, duplicate-free and earlier than *seq*.
    """
    if len(sources) == 1:
        # A tool result's one call: the common case, without building a set.
        source = sources[0]
        if type(source) is int and 0 <= source < seq:
            return
    # Exact ints: a bool or float seq would be stored as ``true`` or ``1.0``.
    elif sources and set(map(type, sources)) == _INT_ONLY and _unique_and_earlier(sources, seq):
        return
    raise SessionError(
        f"{kind}: source_event_seqs must be non-empty, unique, earlier integer seqs",
        code="INVALID_SOURCES",
    )


def _unique_and_earlier(sources: tuple[int, ...], seq: int) -> bool:
    """Whether the ints *sources* are unique and each in ``0 <= source < seq``."""
    first = sources[0]
    if sources == tuple(range(first, first + len(sources))):
        # A step's chunks, logged one after another (an assistant message's
        # sources): unique and ordered, so only the ends are tested.
        return first >= 0 and sources[-1] < seq
    return len(set(sources)) == len(sources) and max(sources) < seq and min(sources) >= 0


def checked_sources(kind: str, value: Sequence[int], seq: int) -> tuple[int, ...]:
    """:func:`as_sources` of *value*, refused by :func:`check_sources` unless valid.

    A range with a positive step holds exact ints, unique and ascending: only
    its ends are tested, where each item of another sequence is (the loop
    gives a step's chunk seqs, one run, as a range).
    """
    if type(value) is range and value and value.step > 0 and value.start >= 0 and value[-1] < seq:
        return tuple(value)
    sources = as_sources(value)
    check_sources(kind, sources, seq)
    return sources
