"""The canonical order of a view's tools: the order a caller lists, the rest by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from retinue._errors import ConfigError

from ._tool import Tool

__all__ = ["ordered_names"]

_REST = "*"


def ordered_names(
    view: Mapping[str, Tool],
    order: Sequence[str],
    check_name: Callable[[str, Mapping[str, Tool]], None],
) -> list[str]:
    """The names of *view* in *order*, the rest sorted in its one ``"*"`` slot (or after it).

    *check_name* refuses a listed name it takes for a typo, given the view.

    Raises:
        ConfigError: *order* holds something that is no str, or repeats a name.
    """
    seen: set[str] = set()
    for name in order:
        if not isinstance(name, str):
            raise ConfigError(f"tool order must hold tool names, got {name!r}")
        if name in seen:
            raise ConfigError(f'tool order lists "{name}" twice')
        seen.add(name)
        if name != _REST:
            check_name(name, view)
    rest = sorted(name for name in view if name not in seen)
    slots = list(order) if _REST in seen else [*order, _REST]
    names: list[str] = []
    for name in slots:
        if name == _REST:
            names.extend(rest)
        elif name in view:
            names.append(name)
    return names
