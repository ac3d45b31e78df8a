"""Reading the type hints a tool's schema is made of: resolving only those, and unwrapping them."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import sys
import typing
from collections.abc import Collection, Iterator, Mapping
from typing import Annotated, NotRequired, Required, TypeGuard, TypeVar, final

import attrs

__all__ = [
    "HintTooDeepError",
    "arguments_of",
    "generic_record",
    "is_named_tuple",
    "is_read_only",
    "is_record_class",
    "is_type_alias",
    "is_typeddict",
    "parameter_hints",
    "record_hints",
    "resolve_hints",
    "resolving_in",
    "substituted",
    "unwrap",
]

# The local names of the scope a tool is made in, while its schema is read.
_SCOPE: contextvars.ContextVar[Mapping[str, object] | None] = contextvars.ContextVar(
    "_SCOPE", default=None
)


@contextlib.contextmanager
def resolving_in(scope: Mapping[str, object] | None) -> Iterator[None]:
    """Resolve hints among the local names of *scope* too, while the block runs.

    Under ``from __future__ import annotations`` a hint is a string, looked up
    in its module's globals only: a tool made inside a function could not name
    a type defined there, as its hint evaluated at once would. ``None``: only
    the module's names, as for a tool made at module level or through a helper.
    """
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


class HintTooDeepError(TypeError):
    """A type hint nested deeper than Python's stack holds while it is read or described, or
    than a JSON value may nest once described."""

    def __init__(self, where: str, why: str = "deeper than Python's stack holds") -> None:
        super().__init__(f"{where}: its type hint is nested too deeply to describe ({why})")


def resolve_hints(
    owner: object, where: str, globalns: dict[str, object] | None = None
) -> dict[str, object]:
    """Every resolved hint of *owner*, ``Annotated`` kept; a ``TypeError`` naming *where*.

    Inside :func:`resolving_in`, the local names of the scope the tool is made
    in come before the module's, as they would for a hint evaluated there (a
    class's own names before both).
    """
    scope = _SCOPE.get()
    localns = None
    if scope:
        localns = {**scope, **vars(owner)} if isinstance(owner, type) else dict(scope)
    try:
        return typing.get_type_hints(owner, globalns=globalns, localns=localns, include_extras=True)
    except RecursionError:
        raise HintTooDeepError(where) from None  # its traceback is a thousand frames
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
        holder: object = _Annotations(parameters, wrapped=function)
    else:
        holder, parameters = function, annotations if isinstance(annotations, dict) else {}
    try:
        return resolve_hints(holder, where)
    except HintTooDeepError:
        for name, hint in parameters.items():  # resolved alone, the one nested so deep fails
            resolve_hints(_Annotations({name: hint}, wrapped=function), f"{where}({name})")
        raise


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


def unwrap(hint: object) -> tuple[object, list[object]]:
    """Strip ``Annotated``, ``(Not)Required`` and ``ReadOnly``: the bare hint and the metadata.

    The metadata of an inner ``Annotated`` comes first: the nearer the type, the
    more it says of it (its first str is the description).
    """
    layers: list[tuple[object, ...]] = []
    while True:
        origin = typing.get_origin(hint)
        if origin is Annotated:
            args = typing.get_args(hint)
            layers.append(args[1:])
            hint = args[0]
        elif origin is Required or origin is NotRequired or is_read_only(origin):
            hint = typing.get_args(hint)[0]
        else:
            return hint, [item for layer in reversed(layers) for item in layer]


_TYPING_MODULES = ("typing", "typing_extensions")


def is_read_only(origin: object) -> bool:
    """Whether *origin* is ``ReadOnly`` (typing's from Python 3.13, or typing_extensions')."""
    module = getattr(origin, "__module__", None)
    return getattr(origin, "_name", None) == "ReadOnly" and module in _TYPING_MODULES


def is_typeddict(hint: object) -> bool:
    """Whether *hint* is a TypedDict, typing_extensions' too (a class of its own before 3.13)."""
    return typing.is_typeddict(hint) or (
        isinstance(hint, type)
        and issubclass(hint, dict)
        and isinstance(getattr(hint, "__required_keys__", None), frozenset)
        and isinstance(getattr(hint, "__optional_keys__", None), frozenset)
    )


def is_named_tuple(hint: object) -> bool:
    """Whether *hint* is a ``NamedTuple`` class (``typing``'s or ``collections.namedtuple``'s)."""
    return (
        isinstance(hint, type)
        and issubclass(hint, tuple)
        and isinstance(getattr(hint, "_fields", None), tuple)
        and isinstance(getattr(hint, "_field_defaults", None), dict)
    )


def is_record_class(hint: object) -> TypeGuard[type[object]]:
    """Whether *hint* is a class described as an object of its fields: an attrs class, a
    dataclass or a ``NamedTuple`` (a ``TypedDict`` is no class of its own)."""
    return isinstance(hint, type) and (
        attrs.has(hint) or dataclasses.is_dataclass(hint) or is_named_tuple(hint)
    )


def is_type_alias(hint: object) -> bool:
    """Whether *hint* is a ``TypeAliasType``: Python 3.12's ``type X = ...``, or the backport's."""
    kind = type(hint)
    return kind.__name__ == "TypeAliasType" and kind.__module__ in _TYPING_MODULES


# The type arguments of the generic record being described: each of its type variables'.
_ARGUMENTS: contextvars.ContextVar[Mapping[object, object] | None] = contextvars.ContextVar(
    "_ARGUMENTS", default=None
)


def generic_record(hint: object) -> type[object] | None:
    """The record class *hint* gives type arguments to (``Box`` of ``Box[int]``), else ``None``."""
    origin = typing.get_origin(hint)
    if not isinstance(origin, type) or not typing.get_args(hint):
        return None
    if is_record_class(origin) or is_typeddict(origin):
        return origin
    return None


@contextlib.contextmanager
def arguments_of(hint: object, where: str = "") -> Iterator[None]:
    """Read the type variables of record *hint* while its fields are described.

    Its own (``Box[int]``: ``int`` for Box's), and those its bases are given
    (``class IntBox(Box[int])``), in place of those of the record around it: an
    argument naming one of those was replaced when *hint* itself was read
    (:func:`substituted`).

    Raises:
        TypeError: a type variable reads as one type in *hint* and as another in
            a base; the message starts with *where*, when given.
    """
    token = _ARGUMENTS.set(_type_arguments(hint, where))
    try:
        yield
    finally:
        _ARGUMENTS.reset(token)


def _type_arguments(hint: object, where: str) -> dict[object, object]:
    record = typing.get_origin(hint) or hint
    known: dict[object, object] = {}
    if record is not hint:
        parameters = getattr(record, "__parameters__", ())
        known.update(zip(parameters, typing.get_args(hint), strict=False))
    pending, seen = [record], set()
    while pending:  # each base once, through the generic ones a TypedDict keeps out of its MRO
        klass = pending.pop()
        if not isinstance(klass, type) or klass in seen:
            continue
        seen.add(klass)
        for base in vars(klass).get("__orig_bases__", klass.__bases__):
            origin = typing.get_origin(base) or base
            parameters = getattr(origin, "__parameters__", ())
            for parameter, argument in zip(parameters, typing.get_args(base), strict=False):
                # A type variable of the subclass's own, given on to its base: its value.
                given = known.get(argument, argument) if isinstance(argument, TypeVar) else argument
                if known.setdefault(parameter, given) != given:
                    raise _ambiguous(where, record, parameter, (known[parameter], given))
            pending.append(origin)
    return known


def _ambiguous(
    where: str, record: object, parameter: object, readings: tuple[object, object]
) -> TypeError:
    """One type variable read as two types, in the class and in one of its bases.

    Fields are described with one reading of each variable, whichever class
    declares them: the base's fields would be described, and built, as the other.
    """
    name = getattr(record, "__qualname__", repr(record))
    one, other = readings
    return TypeError(
        f"{where + ': ' if where else ''}{name} reads the type variable {parameter} as both "
        f"{one!r} and {other!r}, in itself and in a base: give {name} type variables of its "
        "own, not those its bases declare"
    )


def substituted(hint: object) -> object:
    """*hint* with the type variables of the generic record being described replaced."""
    known = _ARGUMENTS.get()
    if not known:
        return hint
    if isinstance(hint, TypeVar):
        return known.get(hint, hint)
    parameters = getattr(hint, "__parameters__", None)
    if typing.get_origin(hint) is None or not parameters:
        return hint
    try:  # list[T] -> list[int], Box[T] | None -> Box[int] | None
        return hint[tuple(known.get(p, p) for p in parameters)]  # type: ignore[index]
    except TypeError:
        return hint
