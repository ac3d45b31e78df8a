"""How a configuration's problems read: each as its key path and what is wrong there."""

from __future__ import annotations

import re

import attrs
import cattrs

from retinue._config_checks import InvalidValueError, InvalidValuesError

__all__ = ["config_problems"]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path and key else path or key


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
"""A key TOML lets a file write unquoted."""


def _shown_key(key: object) -> str:
    """An unknown *key* as a message names it: quoted unless it is a bare key.

    Written as it is, a key with a space, a dot or an invisible character
    (``max_parallel_tool_calls\\u200b``) would read as a known key or a key path.
    """
    shown = key if isinstance(key, str) and _BARE_KEY.fullmatch(key) else repr(key)
    if len(shown) > _LONGEST_KEY_SHOWN:
        # A key of megabytes would make a message of megabytes: its start says which.
        return f"{shown[:40]}... ({len(shown)} characters)"
    return shown


_LONGEST_KEY_SHOWN = 60


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _unknown_key(table: type, key: object, path: str) -> str:
    """The problem of an unknown *key* of *table*, naming the key meant when *key* is
    another spelling of one: the specification's camelCase (``sessionId``), capitals,
    or the hyphens many TOML files write keys with (``session-id``)."""
    problem = f"{_join(path, _shown_key(key))}: unknown key"
    if not isinstance(key, str) or not attrs.has(table):
        return problem
    meant = _CAMEL_HUMP.sub(r"_\1", key).lower().replace("-", "_")
    if meant != key and meant in attrs.fields_dict(table):
        return f"{problem}: the key is spelled {meant}"
    return problem


def config_problems(exc: BaseException, path: str = "") -> list[str]:
    """Every problem under *exc*, each as ``"<key path>: <reason>"``."""
    if isinstance(exc, cattrs.IterableValidationError):
        indexed, unplaced = exc.group_exceptions()
        found = [p for sub, note in indexed for p in config_problems(sub, f"{path}[{note.index}]")]
    elif isinstance(exc, cattrs.ClassValidationError):
        named, unplaced = exc.group_exceptions()
        found = [p for sub, note in named for p in config_problems(sub, _join(path, note.name))]
    elif isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return [_unknown_key(exc.cl, key, path) for key in sorted(exc.extra_fields, key=_shown_key)]
    elif isinstance(exc, InvalidValueError):
        return [f"{_join(path, exc.key) or '<top level>'}: {exc.reason}"]
    elif isinstance(exc, InvalidValuesError):
        return [p for problem in exc.problems for p in config_problems(problem, path)]
    elif isinstance(exc, KeyError):
        return [f"{path}: required key missing"]
    else:
        return [f"{path or '<top level>'}: {exc}"]
    return found + [p for sub in unplaced for p in config_problems(sub, path)]
