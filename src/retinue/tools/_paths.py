"""How a refusal names what the model wrote: a key of its arguments, a tool's name.

A key is joined bare after a dot when it is an identifier, hyphens allowed
(``max-count``); any other key (one holding a dot, a bracket, a space or a quote,
or empty) is written in brackets as a JSON string, which no key can misread as
two levels of the arguments or as none. A key or a name longer than a provider
lets a property's or a tool's name be is shown by its start and its length: the
model's mistake, echoed whole, could fill its context.
"""

from __future__ import annotations

import json

__all__ = ["LONGEST_SHOWN", "ROOT", "first_step", "joined", "key_step", "shown_name"]

LONGEST_SHOWN = 64
"""The most characters of a key or a name shown whole: a provider's limit on either."""

_START_SHOWN = 60

ROOT = "arguments"
"""What a path calls the arguments themselves: the start of every other path."""


def joined(path: str, key: str) -> str:
    """The path to *key* of the object at *path*: ``city``, ``options.units``, ``options["x.y"]``."""
    if len(key) <= LONGEST_SHOWN and key.isidentifier():  # most keys: named bare, without a call
        return key if path == ROOT else f"{path}.{key}"
    return first_step(key) if path == ROOT else path + key_step(key)


def key_step(key: str) -> str:
    """The step from a path to its *key*: ``.units``, or ``["x.y"]``."""
    step = first_step(key)
    return step if step.startswith("[") else "." + step


def first_step(key: str) -> str:
    """*key* as the first step of a path, the argument it names: ``units``, or ``["x.y"]``."""
    if len(key) <= LONGEST_SHOWN and key.isidentifier():
        return key
    return key if _plain(key) else _quoted(key)


def shown_name(name: str) -> str:
    """*name* in quotes, ``"lookup"``; a long one as ``"looku..." (1000 characters)``."""
    if len(name) <= LONGEST_SHOWN:
        return f'"{name}"'
    return f'"{name[:_START_SHOWN]}..." ({len(name)} characters)'


def _plain(key: str) -> bool:
    return len(key) <= LONGEST_SHOWN and key.replace("-", "_").isidentifier()


def _quoted(key: str) -> str:
    if len(key) <= LONGEST_SHOWN:
        return f"[{json.dumps(key, ensure_ascii=False)}]"
    start = json.dumps(key[:_START_SHOWN], ensure_ascii=False)
    return f'[{start[:-1]}..." ({len(key)} characters)]'
