"""Records described once: those used more than once, or inside themselves, under ``$defs``.

A record (a TypedDict, an attrs class, a dataclass, a generic one with its
arguments) written out at each use makes a schema that doubles with each level
of a record holding the next one twice. So a schema is built in two passes.
The first builds each record once, counting its uses and noting those met
inside themselves; when none is used twice or is recursive, its result is the
schema, each record written out where it is used. Otherwise the
second pass describes each such record once, under ``"$defs"`` at the root,
and each use refers to it: ``{"$ref": "#/$defs/Name"}``, as pydantic writes it.
"""

from __future__ import annotations

import contextvars
import re
import typing
from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial
from typing import TypeVar, final

import attrs

from ._deep import nested
from ._located import Coerce, Shape

__all__ = ["REF_PREFIX", "defs_root", "shared_record", "when_built", "with_definitions"]

REF_PREFIX = "#/$defs/"

_T = TypeVar("_T")


@final
@attrs.define
class _Pass:
    """One pass of a schema's build: the records met, and those described once (*names*)."""

    names: Mapping[object, str] | None  # None: the counting pass
    uses: Counter[object] = attrs.field(factory=Counter)
    recursive: set[object] = attrs.field(factory=set)
    open: set[object] = attrs.field(factory=set)
    built: dict[object, Shape] = attrs.field(factory=dict)
    definitions: dict[str, dict[str, object]] = attrs.field(factory=dict)
    root: Mapping[str, object] | None = None
    # Run once the pass is over, when each $ref leads to its finished definition.
    pending: list[Callable[[], None]] = attrs.field(factory=list)

    def shared(self) -> list[object]:
        """The records to describe once, in the order they were first met."""
        return [key for key, count in self.uses.items() if count > 1 or key in self.recursive]


_PASS: contextvars.ContextVar[_Pass | None] = contextvars.ContextVar("_PASS", default=None)


def with_definitions(build: Callable[[], _T]) -> tuple[_T, dict[str, object]]:
    """What *build* returns, and the ``$defs`` its schemas refer to (empty: none do).

    *build* runs once when no record is used twice or inside itself, else twice.
    """
    counting = _Pass(names=None)
    built = _run(counting, build, finish=False)
    shared = counting.shared()
    if not shared:
        for check in counting.pending:  # its schema is kept: no pass follows
            check()
        return built, {}
    final_pass = _Pass(names=_names(shared))
    built = _run(final_pass, build, finish=True)
    definitions = final_pass.definitions
    return built, {name: definitions[name] for name in sorted(definitions)}


def _run(current: _Pass, build: Callable[[], _T], *, finish: bool) -> _T:
    """*build*'s result in pass *current*; with *finish*, its pending checks run after it."""
    token = _PASS.set(current)
    try:
        built = build()
        for check in current.pending if finish else ():
            check()
    finally:
        _PASS.reset(token)
    return built


def when_built(check: Callable[[], None]) -> None:
    """Run *check* once the schema being built is finished (now, outside a build).

    A part of a record still being described refers to it by a ``$ref`` its
    definition does not answer yet: a value is judged against it afterwards.
    """
    current = _PASS.get()
    if current is None:
        check()
    else:
        current.pending.append(check)


def defs_root() -> Mapping[str, object] | None:
    """The root a ``$ref`` of the schema being built resolves in, once it is built.

    ``None`` outside a pass that refers to records: the schema holds no ``$ref``.
    """
    current = _PASS.get()
    if current is None or current.names is None:
        return None
    if current.root is None:
        # One object for the whole schema: a conversion keeps its judgements by it.
        current.root = {"$defs": current.definitions}
    return current.root


def shared_record(key: object, build: Callable[[], Shape]) -> Shape:
    """The shape of record *key*, *build* run at most once per pass.

    In the counting pass a use inside the record itself is noted and given a
    stand-in; in the second, a record used more than once is a reference.
    """
    current = _PASS.get()
    if current is None or not _hashable(key):
        return build()
    if current.names is None:
        return _counted(current, key, build)
    name = current.names.get(key)
    if name is None:
        # Used once: written out where it is used, and counted as it converts, as it may
        # be a link of a circle of records (A holds B, which holds A).
        built = build()
        return Shape(built.schema, partial(nested, built.coerce))
    shape = current.built.get(key)
    if shape is not None:
        return shape
    cell: list[Coerce] = []
    # A use inside the record itself converts by its conversion, known once it is built.
    shape = current.built[key] = Shape({"$ref": REF_PREFIX + name}, _deferred(cell))
    described = build()
    current.definitions[name] = described.schema
    cell.append(described.coerce)
    return shape


def _deferred(cell: list[Coerce]) -> Coerce:
    """The conversion *cell* will hold: read at each call, as it is filled after this returns."""

    def coerce(value: object) -> object:
        return nested(cell[0], value)

    return coerce


def _counted(current: _Pass, key: object, build: Callable[[], Shape]) -> Shape:
    current.uses[key] += 1
    shape = current.built.get(key)
    if shape is not None:
        return shape
    if key in current.open:
        current.recursive.add(key)
        return Shape({"type": "object"})  # a stand-in: this pass's schema is not kept
    current.open.add(key)
    try:
        shape = current.built[key] = build()
    finally:
        current.open.discard(key)
    return shape


def _hashable(key: object) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _names(records: list[object]) -> dict[object, str]:
    """A ``$defs`` name for each record: its own, its module's too when another has it.

    ``Box[int]`` is ``Box_int_``; a name still taken is numbered in the order met.
    """
    short = Counter(_name(record, qualified=False) for record in records)
    names: dict[object, str] = {}
    taken: set[str] = set()
    for record in records:
        name = _name(record, qualified=False)
        if short[name] > 1:
            name = _name(record, qualified=True)
        unique, number = name, 1
        while unique in taken:
            number += 1
            unique = f"{name}_{number}"
        taken.add(unique)
        names[record] = unique
    return names


# Letters, digits and underscores: a name any JSON pointer and provider takes as it is.
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def _name(record: object, *, qualified: bool) -> str:
    return _UNSAFE.sub("_", _text(record, qualified=qualified))


def _text(hint: object, *, qualified: bool) -> str:
    """*hint* written out: ``Box[int]``, with its module when *qualified* (``mod.Box[int]``)."""
    origin = typing.get_origin(hint)
    if origin is not None and isinstance(origin, type):
        arguments = ", ".join(_text(a, qualified=False) for a in typing.get_args(hint))
        return f"{_text(origin, qualified=qualified)}[{arguments}]"
    name = getattr(hint, "__qualname__", None) if qualified else getattr(hint, "__name__", None)
    if not isinstance(name, str):
        return repr(hint)
    module = getattr(hint, "__module__", None)
    return f"{module}.{name}" if qualified and isinstance(module, str) else name
