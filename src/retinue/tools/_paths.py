"""How an argument refusal names a key: ``options.units``, or ``options["x.y"]``.

A key is joined bare after a dot when it is an identifier, hyphens allowed
(``max-count``); any other key (one holding a dot, a bracket, a space or a quote,
or empty) is written in brackets as a JSON string, which no key can misread as
two levels of the arguments or as none.
"""

from __future__ import annotations

import json

__all__ = ["first_step", "key_step"]


def key_step(key: str) -> str:
    """The step from a path to its *key*: ``.units``, or ``["x.y"]``."""
    if key.isidentifier():  # most keys: one test, no copy
        return "." + key
    return "." + key if _plain(key) else _quoted(key)


def first_step(key: str) -> str:
    """*key* as the first step of a path, the argument it names: ``units``, or ``["x.y"]``."""
    if key.isidentifier():
        return key
    return key if _plain(key) else _quoted(key)


def _plain(key: str) -> bool:
    return key.replace("-", "_").isidentifier()


def _quoted(key: str) -> str:
    return f"[{json.dumps(key, ensure_ascii=False)}]"
