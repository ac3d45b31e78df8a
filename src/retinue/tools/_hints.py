"""Resolving the type hints a tool's schema is read from, and only those."""

from __future__ import annotations

import sys
import typing
from collections.abc import Collection
from typing import final

__all__ = ["parameter_hints", "record_hints", "resolve_hints"]


def resolve_hints(
    owner: object, where: str, globalns: dict[str, object] | None = None
) -> dict[str, object]:
    """Every resolved hint of *owner*, ``Annotated`` kept; a ``TypeError`` naming *where*."""
    try:
        return typing.get_type_hints(owner, globalns=globalns, include_extras=True)
    except Exception as exc:
        raise TypeError(f"{where}: cannot resolve type hints: {exc}") from exc


def parameter_hints(function: object, where: str) -> dict[str, object]:
    """The resolved hints of *function*'s parameters; its return annotation is not read.

    The schema has no use for it, and under ``from __future__ import annotations``
    it may name a type imported only for type checkers, which no lookup finds.
    """
    try:
        annotations = getattr(function, "__annotations__", None)
    except Exception:  # evaluated on access from Python 3.14: resolving says what failed
        annotations = None
    if isinstance(annotations, dict) and "return" in annotations:
        parameters = {name: hint for name, hint in annotations.items() if name != "return"}
        return resolve_hints(_Annotations(parameters, wrapped=function), where)
    return resolve_hints(function, where)


def record_hints(cls: type[object], fields: Collection[str], where: str) -> dict[str, object]:
    """The resolved hints of a record class's *fields*.

    All of the class's hints when they resolve; else only the fields', each in
    the module of the class that declares it: a ``ClassVar`` or another
    annotation no constructor takes may name a type imported only for type
    checkers, and the schema has no use for it.
    """
    try:
        return resolve_hints(cls, where)
    except TypeError:
        pass
    hints: dict[str, object] = {}
    for base in reversed(cls.__mro__):
        declared = vars(base).get("__annotations__", {})
        own = {name: hint for name, hint in declared.items() if name in fields}
        if own:
            module = sys.modules.get(base.__module__)
            namespace = {**(vars(module) if module else {}), **vars(base)}
            hints.update(resolve_hints(_Annotations(own), where, namespace))
    return hints


@final
class _Annotations:
    """An object ``typing.get_type_hints`` reads as holding only *annotations*.

    With *wrapped*, it finds that function's globals through ``__wrapped__``,
    as it does for a wrapper.
    """

    def __init__(self, annotations: dict[str, object], wrapped: object = None) -> None:
        self.__annotations__ = annotations
        if wrapped is not None:
            self.__wrapped__ = wrapped
            self.__type_params__ = getattr(wrapped, "__type_params__", ())
