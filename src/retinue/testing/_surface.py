"""The surface of a log being walked, checked op by op as a session applies it (R4.19)."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from retinue.session import Event, Replace

from ._invariant import fail

__all__ = ["SurfaceWalk"]


@attrs.define(eq=False)
class SurfaceWalk:
    """The seqs on the surface, in surface order, linked both ways (R4.19).

    A link per seq makes an append O(1) and a replace O(what it removes), so a
    walk of a whole log is linear in it: each seq leaves the surface at most
    once. A replace applies as :class:`~retinue.session.Session` applies it:
    both ends on the surface, the start not after the end in surface order,
    every removed seq among the event's ``source_event_seqs``.
    """

    _after: dict[int, int | None] = attrs.field(factory=dict)
    _before: dict[int, int | None] = attrs.field(factory=dict)
    _head: int | None = None
    _tail: int | None = None

    def __iter__(self) -> Iterator[int]:
        """The seqs on the surface, head to tail."""
        seq = self._head
        while seq is not None:
            yield seq
            seq = self._after[seq]

    def feed(self, event: Event) -> None:
        """Apply *event*'s surface op, whose kind is checked already (R4.6).

        Raises:
            InvariantError: a replace that a session refuses (R4.19).
        """
        op = event.surface_op
        if isinstance(op, Replace):
            self._link(event.seq, *self._replaced_bounds(event, op))
        else:
            self._link(event.seq, self._tail, None)

    def _replaced_bounds(self, event: Event, op: Replace) -> tuple[int | None, int | None]:
        """Unlink the seqs *op* replaces; return the seqs around them."""
        after = self._after
        if op.start not in after or op.end not in after:
            raise fail(event, "R4.19", f"replace range {op.start}..{op.end} is not on the surface")
        removed = self._range(event, op)
        sources = set(event.source_event_seqs or ())
        missing = next((seq for seq in removed if seq not in sources), None)
        if missing is not None:
            raise fail(event, "R4.19", f"source_event_seqs miss replaced seq {missing}")
        bounds = self._before[op.start], after[op.end]
        for seq in removed:
            del after[seq], self._before[seq]
        return bounds

    def _range(self, event: Event, op: Replace) -> list[int]:
        """The seqs from *op*'s start through its end, in surface order."""
        removed: list[int] = []
        seq: int | None = op.start
        while seq is not None:
            removed.append(seq)
            if seq == op.end:
                return removed
            seq = self._after[seq]
        # Only a failing replace walks past its end: to the tail, once.
        raise fail(event, "R4.19", f"replace start {op.start} is after its end {op.end}")

    def _link(self, seq: int, before: int | None, after: int | None) -> None:
        """Put *seq* between *before* and *after*, neighbours on the surface or its ends."""
        self._before[seq], self._after[seq] = before, after
        if before is None:
            self._head = seq
        else:
            self._after[before] = seq
        if after is None:
            self._tail = seq
        else:
            self._before[after] = seq
