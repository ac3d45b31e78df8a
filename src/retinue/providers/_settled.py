"""A request's mapped history, built on what the session's last request mapped (pure).

A history only grows between two requests of a session (a replace starts a
new list), so the items its first messages mapped to stay as they were, save
the last few, which the next messages may still change: a run of user
messages goes on, reasoning of the current turn stops being sent. An adapter
keeps, beside the history, what its *settled* messages (those no later
message can change) mapped to and the replay ids they took, and maps only
the messages after them: the cost of a request's body no longer grows with
the length of the session, save the copy of the list of items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import final

import attrs

from retinue._content import Message
from retinue._request import derived_of

from ._replay import ReplayIds

__all__ = ["Settled", "keep_settled", "take_settled"]

JsonObject = dict[str, object]


@final
@attrs.define(eq=False)
class Settled:
    """What a history's first :attr:`count` messages map to.

    :attr:`items` are the mapped items, :attr:`texts` whatever else an
    adapter collects on the way (Anthropic's system texts), :attr:`ids` the
    replay ids those messages took. The mapper owns it while it maps: it
    extends the lists and moves :attr:`count` on, then cuts back to the
    messages that are settled.
    """

    prefix: tuple[Message, ...]
    ids: ReplayIds
    count: int = 0
    items: list[JsonObject] = attrs.field(factory=list)
    texts: list[str] = attrs.field(factory=list)

    def cut_back(self, count: int, items: int, texts: int) -> None:
        """Drop what was mapped after the first *count* messages; give back the ids since the mark."""
        self.count = count
        del self.items[items:]
        del self.texts[texts:]
        self.ids.rewind()


def take_settled(
    messages: Sequence[Message],
    key: object,
    ids: Callable[[], ReplayIds],
    *,
    upto: int | None = None,
) -> Settled:
    """What *key*'s mapper settled of *messages*'s list, taken out of its store; or a fresh start.

    It is built on only if it settled no further than *upto* messages (all
    of them when ``None``): a mapper whose settled messages depend on where
    the history ends (the current turn's start) says where that is.

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
        if settled.count <= (len(messages) if upto is None else upto):
            return settled
        store[key] = settled
    return Settled(prefix, ids())


def keep_settled(messages: Sequence[Message], key: object, settled: Settled) -> None:
    """Keep *settled* beside *messages* for the next request, unless another is kept there."""
    found = derived_of(messages)
    if found is not None:
        found[1].setdefault(key, settled)
