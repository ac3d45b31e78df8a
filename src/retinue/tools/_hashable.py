"""Whether the values of a type hint are hashable: what a set parameter's items must be."""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Iterable
from typing import Literal, Union

import attrs

from ._hints import (
    arguments_of,
    generic_record,
    is_named_tuple,
    is_record_class,
    is_type_alias,
    record_hints,
    substituted,
    unwrap,
)

__all__ = ["unhashable"]

_PRIMITIVES = (str, int, float, bool)


def unhashable(
    hint: object,
    open_records: frozenset[object] = frozenset(),
    known: dict[object, str | None] | None = None,
) -> str | None:
    """Why a value of *hint* may be unhashable (a list, a mutable record), or ``None``.

    *open_records* are the records whose fields are being checked, with their
    type arguments (``Box[int]``): one met again inside its own fields is no new
    reason, but ``Box[list[int]]`` inside ``Box[int]`` is another record. *known* holds the answer for each
    record already checked: one held by several fields is checked once, so in a
    chain of records each holding the next one twice, each is checked once, not
    twice as often as the one above it.
    """
    known = {} if known is None else known

    def first(hints: Iterable[object]) -> str | None:
        return next(
            (p for h in hints if (p := unhashable(h, open_records, known)) is not None), None
        )

    hint = unwrap(substituted(hint))[0]
    if isinstance(hint, typing.NewType):
        return first([hint.__supertype__])
    if is_type_alias(hint):
        return first([typing.cast("typing.Any", hint).__value__])
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        return first(typing.get_args(hint))
    if origin is tuple:
        return first(typing.get_args(hint)[:1])
    if origin is Literal or hint is None or hint in _PRIMITIVES or hint is type(None):
        return None
    if isinstance(hint, type) and issubclass(hint, enum.Enum | frozenset):
        return None
    if origin is frozenset or origin is collections.abc.Set:
        return None
    record = hint if isinstance(hint, type) else generic_record(hint)
    if is_record_class(record):
        if getattr(record, "__hash__", None) is None:
            return f"{record.__qualname__} is not hashable"
        if hint in open_records:
            return None
        if hint in known:
            return known[hint]
        with arguments_of(hint):  # Box[int]'s fields: its type variable read as int
            problem = known[hint] = _unhashable_field(record, open_records | {hint}, known)
        return problem
    return f"{hint!r} may hold lists or objects"


def _unhashable_field(
    cls: type[object], open_records: frozenset[object], known: dict[object, str | None]
) -> str | None:
    """Why a field of record *cls* may make its generated hash fail, or ``None``.

    A hash attrs or dataclasses generated hashes the fields' values, so they
    must be hashable too (a frozen record with a list field hashes by
    raising); a hand-written ``__hash__`` is trusted.
    """
    hashed = _hashed_fields(cls)
    if hashed is None:
        return None
    owner, names = hashed
    hints = record_hints(owner, names, owner.__qualname__)
    for name in names:
        if name not in hints:
            return f"{owner.__qualname__}.{name} is untyped and is hashed"
        problem = unhashable(hints[name], open_records, known)
        if problem is not None:
            return f"{owner.__qualname__}.{name}: {problem}"
    return None


def _hashed_fields(cls: type[object]) -> tuple[type[object], list[str]] | None:
    """The record whose ``__hash__`` *cls* uses and the fields it hashes, if attrs or
    dataclasses generated it from them, or it is a ``NamedTuple``'s (the tuple's, of all
    its items); ``None`` for any other ``__hash__``.

    attrs names the file of the code it generates ``<attrs generated ...>``;
    dataclasses generates a hash only for ``unsafe_hash`` or ``frozen`` with
    ``eq``, and keeps a hand-written one, told apart by its code: compiled from
    a string (``exec``) it is named as generated code is, so its instructions
    are compared with those dataclasses generates for the same fields.
    """
    owner = next(base for base in cls.__mro__ if "__hash__" in vars(base))
    if owner is tuple and is_named_tuple(cls):
        return cls, list(typing.cast("typing.Any", cls)._fields)  # a tuple hashes its items
    code = getattr(vars(owner)["__hash__"], "__code__", None)
    if not isinstance(code, types.CodeType):
        return None  # object's identity hash, or a builtin's
    if attrs.has(owner) and code.co_filename.startswith("<attrs generated "):
        return owner, [a.name for a in attrs.fields(owner) if (a.eq if a.hash is None else a.hash)]
    params = vars(owner).get("__dataclass_params__")
    if params is None or not (params.unsafe_hash or (params.eq and params.frozen)):
        return None
    fields = dataclasses.fields(typing.cast("type[typing.Any]", owner))
    names = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    return (owner, names) if _same_code(code, _generated_hash(tuple(names))) else None


def _same_code(code: types.CodeType, other: types.CodeType) -> bool:
    """Whether *code* does what *other* does: compiled in the same file, same instructions."""
    return (code.co_filename, code.co_code, code.co_names, code.co_consts) == (
        other.co_filename,
        other.co_code,
        other.co_names,
        other.co_consts,
    )


@functools.cache
def _generated_hash(names: tuple[str, ...]) -> types.CodeType:
    """The code of the ``__hash__`` dataclasses generates for a record hashing *names*."""
    generated = dataclasses.make_dataclass("Generated", names, frozen=True)
    return typing.cast("types.FunctionType", generated.__hash__).__code__
