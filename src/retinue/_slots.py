"""How the frozen values built every step set their fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["slot_setters"]


def slot_setters(cls: type, *names: str) -> tuple[Callable[[Any, Any], None], ...]:
    """The setters of *cls*'s slots *names*, each called ``setter(instance, value)``.

    How the ``__init__`` of a frozen class built every step sets its fields: a
    slot's own setter spares what ``object.__setattr__`` does first, a lookup of
    the name on the type (and, bound, a method object per instance).
    """
    return tuple(cls.__dict__[name].__set__ for name in names)
