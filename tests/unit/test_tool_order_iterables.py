"""A tool order given as any iterable of names is followed and checked (R7.51)."""

from __future__ import annotations

import pytest

from retinue._errors import ConfigError
from retinue.hooks import HookBus
from retinue.tools import Tool, ToolRegistry, tool


def _make(name: str) -> Tool:
    def body() -> str:
        return name

    return tool(name=name, description=f"{name} tool")(body)


def test_an_order_given_as_a_generator_is_followed() -> None:
    """R7.51: the names of an order read once (a generator) place the tools as a list's
    do: the order is read whole, not spent on the cache key with the tools left sorted by name.
    """
    registry = ToolRegistry(HookBus(), [_make(n) for n in ("a", "b", "c")])
    order = (name for name in ["c", "*", "a"])
    assert [schema.name for schema in registry.schemas(order=order)] == ["c", "b", "a"]


def test_a_generator_order_naming_an_unknown_tool_is_refused() -> None:
    """R7.51: a typo in an order read once is a ConfigError, as in a list, not skipped
    unread with the tools sorted by name.
    """
    registry = ToolRegistry(HookBus(), [_make("a"), _make("b")])
    with pytest.raises(ConfigError, match='unknown tool "nope"'):
        registry.schemas(order=(name for name in ["b", "nope"]))
