"""A request's mapped history, built on what the session's last request mapped (pure).

A history only grows between two requests of a session (a replace starts a
new list), so the items its first messages mapped to stay as they were, save
the last few, which the next messages may still change: a run of user
messages goes on, reasoning of the current turn stops being sent. An adapter
keeps, beside the history, what its *settled* messages (those no later
message can change) mapped to and the replay ids they took, and maps only
the messages after them: the cost of a request's body does not grow with
the length of the session, save the copy of the list of items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, final

import attrs

from retinue._content import Message
from retinue._request import derived_of

from ._replay import ReplayIds

__all__ = ["Point", "Settled", "keep_settled", "set_aside", "take_settled"]

JsonObject = dict[str, object]


class Point(NamedTuple):
    """Where a mapping stood: messages mapped, items and texts it gave, and its ids' checkpoint."""

    messages: int
    items: int
    texts: int
    ids: int


@final
@attrs.define(eq=False)
class Settled:
    """What a history's first :attr:`count` messages map to.

    :attr:`items` are the mapped items, :attr:`texts` whatever else an
    adapter collects on the way (Anthropic's system texts), :attr:`ids` the
    replay ids those messages took. The mapper owns it while it maps: it
    extends the lists and, when done, cuts back to the last :class:`Point`
    no later message can change. :attr:`turn` and :attr:`turn_point` are
    where the current turn's messages start and a point at or before it, for
    a mapping that sends a turn's messages otherwise once the turn has ended.
    """

    prefix: tuple[Message, ...]
    ids: ReplayIds
    count: int = 0
    items: list[JsonObject] = attrs.field(factory=list)
    texts: list[str] = attrs.field(factory=list)
    turn: int = 0
    turn_point: Point = Point(0, 0, 0, 0)
    scan: object = None
    """What the mapper found walking back over its settled items, kept for its next request
    to walk only the items after them (Anthropic's: where the tool loop they end in began)."""

    def point(self, count: int) -> Point:
        """Where the mapping of the first *count* messages stands now."""
        return Point(count, len(self.items), len(self.texts), self.ids.checkpoint())

    def cut_back(self, point: Point) -> None:
        """Drop what was mapped after *point*, ids taken included."""
        self.count = point.messages
        del self.items[point.items :]
        del self.texts[point.texts :]
        self.ids.rewind(point.ids)


def take_settled(messages: Sequence[Message], key: object, ids: Callable[[], ReplayIds]) -> Settled:
    """What *key*'s mapper settled of *messages*'s list, taken out of its store; or a fresh start.

    Taken, not shared: a second mapper of the same history (another thread)
    starts afresh instead of building on a half-updated one. One settled
    further than *messages* (an older snapshot mapped again) stays kept.
    """
    found = derived_of(messages)
    if found is None:
        return Settled((), ids())
    prefix, store = found
    settled = store.pop(key, None)
    if isinstance(settled, Settled) and settled.prefix == prefix:
        if settled.count <= len(messages):
            return settled
        store[key] = settled
    return Settled(prefix, ids())


def set_aside(
    messages: Sequence[Message], key: object, settled: Settled, ids: Callable[[], ReplayIds]
) -> Settled:
    """Keep *settled*, which maps a later history than *messages*, and start afresh."""
    keep_settled(messages, key, settled)
    return Settled(settled.prefix, ids())


def keep_settled(messages: Sequence[Message], key: object, settled: Settled) -> None:
    """Keep *settled* beside *messages* for the next request, unless another is kept there."""
    found = derived_of(messages)
    if found is not None:
        found[1].setdefault(key, settled)
