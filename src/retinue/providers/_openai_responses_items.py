"""Which Responses output item an event is about, when events leave out ``output_index``
(pure)."""

from __future__ import annotations

from typing import final

import attrs

__all__ = ["ItemKey", "Items"]

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
    """The ``output_index`` of each item added with one, by its id."""
    _unnamed: int = attrs.field(default=0, init=False)

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
        Else the event is about the item now streaming (a server may name the
        call id there).
        """
        item = payload.get("item")
        if isinstance(item, dict):
            item_id = item.get("id")
            if isinstance(item_id, str) and item_id:
                self._named.add(item_id)
                self._latest = ("item", item_id)
            elif kind == "response.output_item.added":
                self._unnamed += 1
                self._latest = ("unnamed-item", self._unnamed)
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
        """Note an item added under *output*: its ``output_index`` kept by its id."""
        item_id = item.get("id")
        if type(output) is int and isinstance(item_id, str):
            self._outputs[item_id] = output
