"""Whether a value nests more levels of objects and arrays than a limit (R4.5).

One walker measures every such depth: a frozen value put inside a new one, a
content block before it is stored and once it is loaded, a tool's parameter
schema. Each caller says which types are a level and what each one holds, in a
table keyed by the exact type: a node costs one lookup, and a scalar (any type
the table lacks) is no level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

__all__ = ["Levels", "deeper_than"]

# Each type that is a level, and what one of it holds, one level further in.
Levels: TypeAlias = Mapping[type, Callable[[Any], Iterable[object]]]


def deeper_than(value: object, limit: int, levels: Levels) -> bool:
    """Whether *value* nests more than *limit* levels, a level being each node *levels* opens.

    Level by level, not a recursion: it measures a value of any depth from
    any depth of the stack, and stops one level past *limit*. While it runs it
    holds a reference to each node of the level it is on (8 bytes a node, a
    fraction of what the value itself takes).
    """
    inside = levels.get
    level = [value]
    for _ in range(limit + 1):
        below: list[object] = []
        opened = False
        for node in level:
            holds = inside(type(node))
            if holds is not None:
                below.extend(holds(node))
                opened = True
        if not opened:
            return False
        level = below
    return True
