"""Which Responses output item an event is about, when events leave out ``output_index``
(pure)."""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from typing import TypeVar, final

import attrs

from ._blocks import malformed

__all__ = ["ItemKey", "Items"]

_Output = TypeVar("_Output")

ItemKey = tuple[str, str | int] | int | None
"""What keys an item's blocks: its ``output_index``, else its id or its place among the
items added without one, else nothing (``None``)."""


@final
@attrs.define(eq=False)
class Items:
    """The items of one response, as events without an ``output_index`` name them."""

    _latest: ItemKey = attrs.field(default=None, init=False)
    """Without ``output_index``: the key of the item now streaming."""
    _latest_done: bool = attrs.field(default=False, init=False)
    """Without ``output_index``: whether the item now streaming was completed."""
    _named: set[str] = attrs.field(factory=set, init=False)
    """The ids items were keyed by, for want of an ``output_index``."""
    _outputs: dict[str, int] = attrs.field(factory=dict, init=False)
    """The ``output_index`` of each item added with one (or placed there), by its id."""
    _unnamed: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    """Numbers the items added without an id or an ``output_index``."""
    _unplaced: dict[Hashable, object] = attrs.field(factory=dict, init=False)
    """The items added without an ``output_index`` that no delta placed yet: by the key each
    was added under, its type."""
    _ids: set[str] = attrs.field(factory=set, init=False)
    """The id of every item added."""
    _shared: set[str] = attrs.field(factory=set, init=False)
    """The ids two or more items were added with at different indices: they name none."""
    _types: dict[int, object] = attrs.field(factory=dict, init=False)
    """The type of the item at each ``output_index`` it was added or placed at, ``None`` once
    it is complete: only an item of a delta's type not complete yet is what a delta naming
    it streams."""

    def key(self, payload: dict[str, object], kind: object) -> ItemKey:
        """Without an ``output_index``, the item an event is about keys its blocks.

        Two calls keyed by nothing would be one block, the first call lost.
        Items stream one after another: an item event (``item`` in it) names
        the item now streaming by its id, or starts an unnamed one when it adds
        an item without an id. Another event's ``item_id`` is followed when an
        item event named that id, or when no item is streaming (none came yet,
        or the latest was completed): a server that adds no items names them
        only so, and their ``output_item.done`` must find what they streamed.
        An ``item_id`` naming an item added with an ``output_index`` is that index.
        Else the event is about the item now streaming, added with an index or
        without (a server may name the call id there).
        """
        item = payload.get("item")
        if isinstance(item, dict):
            item_id = item.get("id")
            if isinstance(item_id, str) and item_id:
                # A delta carrying an index may have named the item before it was added.
                if kind == "response.output_item.added" and item_id in self._ids:
                    self._outputs.pop(item_id, None)  # a second item of one id: a placeholder
                    self._shared.add(item_id)
                self._named.add(item_id)
                self._latest = self._outputs.get(item_id, ("item", item_id))
            elif kind == "response.output_item.added":
                self._latest = ("unnamed-item", next(self._unnamed))
            self._latest_done = kind == "response.output_item.done"
            return self._latest
        item_id = payload.get("item_id")
        if self._outputs and isinstance(item_id, str) and item_id in self._outputs:
            # A server that leaves the index out of deltas only: its item was added with one.
            return self._outputs[item_id]
        if isinstance(item_id, str) and (
            item_id in self._named or (item_id and (self._latest is None or self._latest_done))
        ):
            self._named.add(item_id)
            self._latest = ("item", item_id)
            self._latest_done = False
        return self._latest

    def added(self, output: object, item: dict[str, object]) -> None:
        """Note an item added under *output*: its ``output_index``, or the key it is kept by."""
        item_id = item.get("id")
        if isinstance(item_id, str) and item_id:  # an empty id names no item, as in key()
            self._ids.add(item_id)
        if type(output) is int:
            # The item now streaming, for an event that names none (no index, no item_id).
            self._latest, self._latest_done = output, False
            self._types[output] = item.get("type")
            if isinstance(item_id, str) and item_id not in self._shared:
                self._index(item_id, output)
        else:
            self._unplaced[output] = item.get("type")

    def _index(self, item_id: str, output: int) -> None:
        """Keep *output* as the index of the item *item_id*; an id two items were added
        with (a server's placeholder) names neither from now on."""
        if self._outputs.setdefault(item_id, output) != output:
            del self._outputs[item_id]
            self._shared.add(item_id)

    def done(self, item: dict[str, object], *outputs: object) -> None:
        """The *item* kept by *outputs* (or by its id) is complete: no later delta streams it.

        A call's block may be found by its call id under another key than the
        event's: both are given.
        """
        for output in outputs:
            if type(output) is int:
                if output in self._types:
                    self._types[output] = None
                self._latest_done = self._latest_done or output == self._latest
            elif self._unplaced:
                self._unplaced.pop(output, None)
        item_id = item.get("id")
        if self._unplaced and isinstance(item_id, str):
            self._unplaced.pop(("item", item_id), None)

    def place(self, output: int, item_id: object, kind: str) -> Hashable | None:
        """The key of the item of type *kind*, added without an index, that a delta opening
        a block at *output* streams, now placed there; ``None`` when it streams another.

        The delta's ``item_id`` names it; without one (or naming no item, as a
        server naming the call id), items stream one after another: it is the one
        item of that type added without an index that is not complete yet. An
        ``item_id`` no item was added with yet is the item at *output*, when it
        comes.

        Raises:
            ProviderStreamError: ``MALFORMED_RESPONSE``: the ``item_id`` names an
                item at another ``output_index``, or two or more items are open
                and the delta names none of them.
        """
        known = self.streamed_index(output, item_id, kind)
        if known != output:
            raise malformed(
                f"responses: an event's output_index {output} is not that of its item "
                f"{item_id!r}, which is at {known}"
            )
        if output in self._types:
            return None
        named = ("item", item_id) if isinstance(item_id, str) else None
        found: list[Hashable]
        if named is not None and named in self._unplaced:
            found = [named] if self._unplaced[named] == kind else []
        elif named is not None and item_id in self._ids:
            return None  # an item added with an index of its own
        else:
            if isinstance(item_id, str) and item_id not in self._shared:
                self._index(item_id, output)
            found = [key for key, added in self._unplaced.items() if added == kind]
        if len(found) > 1:
            raise malformed(
                f"responses: a delta's output_index {output} names no item added, and "
                f"{len(found)} {kind} items were added without one: which it streams is unknown"
            )
        return self._placed(found[0], output) if found else None

    def index_of(self, output: _Output, item_id: object) -> _Output | int:
        """The index of the item *item_id* names, where an event's ``output_index``,
        *output*, is another: a completed item or part goes with its item, not beside it."""
        known = (
            self._outputs.get(item_id)
            if isinstance(item_id, str) and item_id in self._ids
            else None
        )
        return output if known is None else known

    def streamed_index(self, output: int, item_id: object, kind: object) -> int:
        """The index of the item a delta of an item of type *kind* at *output* streams: the
        item its ``item_id`` names, if one of that type not completed yet, else *output*.

        A server giving every item one id names by it, before an item is added,
        the item before: a reasoning item, or a call completed already, which no
        delta streams.
        """
        known = self.index_of(None, item_id)
        return output if known is None or self._types.get(known) != kind else known

    def _placed(self, key: Hashable, output: int) -> Hashable:
        """*key*, the item added without an index, placed at *output* from now on."""
        self._types[output] = self._unplaced.pop(key)
        if isinstance(key, tuple) and key[0] == "item" and key[1] not in self._shared:
            self._index(key[1], output)
        if self._latest == key:
            self._latest = output
        return key
