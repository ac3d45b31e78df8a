"""A read-only, live view of a session's events."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import final, overload

from ._events import Event

__all__ = ["EventLog"]


@final
class EventLog(Sequence[Event]):
    """A read-only, live view of a session's events (``events[i].seq == i``)."""

    __slots__ = ("_events",)

    def __init__(self, events: list[Event]) -> None:
        self._events = events

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __reversed__(self) -> Iterator[Event]:
        return reversed(self._events)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        if isinstance(index, slice):
            return tuple(self._events[index])
        return self._events[index]

    def __eq__(self, other: object) -> bool:
        # By value, as the tuple of events it stands for: a log compares equal to a list
        # or tuple of the same events, and to another session's log holding them.
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self._events) == len(other) and all(
            mine == theirs for mine, theirs in zip(self._events, other, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]  # a live view: its value changes with every append

    def __repr__(self) -> str:
        return f"<EventLog of {len(self._events)} events>"
