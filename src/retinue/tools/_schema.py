"""JSON schema and argument binding from a function's signature, type hints and docstring."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Union, final

import attrs

from ._docstring import parse_docstring
from ._shapes import (
    EMPTY,
    Shape,
    accepting_null,
    object_schema,
    raise_located,
    resolve_hints,
    shape_of,
    type_schema,
    unwrap,
    with_default,
)
from ._tool import ToolContext

__all__ = ["FunctionSpec", "describe", "type_schema"]

_UNSUPPORTED_KINDS: dict[object, str] = {
    inspect.Parameter.POSITIONAL_ONLY: "positional-only",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


@final
@attrs.frozen
class FunctionSpec:
    """What the ``@tool`` decorator learns from a function."""

    description: str
    parameters: dict[str, object]
    context_parameter: str | None
    bind: Callable[[Mapping[str, object]], dict[str, object]]


def _is_context(hint: object, where: str) -> bool:
    """Whether *hint* is ``ToolContext`` or ``ToolContext | None``: injected, never advertised.

    Raises:
        TypeError: another union holds ``ToolContext`` (the model could forge one).
    """
    if hint is ToolContext:
        return True
    origin = typing.get_origin(hint)
    if (origin is Union or origin is types.UnionType) and ToolContext in typing.get_args(hint):
        if set(typing.get_args(hint)) == {ToolContext, type(None)}:
            return True
        raise TypeError(f"{where}: a ToolContext parameter may only be optional, not a union")
    return False


def describe(fn: Callable[..., object]) -> FunctionSpec:
    """Derive a tool's description, parameter schema and argument binder from *fn*.

    Raises:
        TypeError: a parameter kind or type hint the schema cannot express.
    """
    where = getattr(fn, "__qualname__", None) or repr(fn)
    signature = inspect.signature(fn)
    target, bound = _unwrap_partial(fn)
    hints = resolve_hints(target if inspect.isroutine(target) else type(target).__call__, where)
    description, documented = parse_docstring(inspect.getdoc(target))
    shapes: dict[str, Shape] = {}
    properties: dict[str, object] = {}
    required: list[str] = []
    context: str | None = None
    for parameter in signature.parameters.values():
        if parameter.name in bound:
            continue  # the partial's value: not the model's to see (a key?) nor to override
        kind = _UNSUPPORTED_KINDS.get(parameter.kind)
        if kind is not None:
            raise TypeError(
                f"{where}: {kind} parameter {parameter.name!r} cannot be a tool argument"
            )
        hint = hints.get(parameter.name, parameter.annotation)
        if _is_context(unwrap(hint)[0], f"{where}({parameter.name})"):
            if context is not None:
                raise TypeError(f"{where}: more than one ToolContext parameter")
            context = parameter.name
            continue
        shape = shapes[parameter.name] = _parameter_shape(parameter, hint, where)
        properties[parameter.name] = _parameter_schema(shape, parameter, documented)
        if parameter.default is EMPTY:
            required.append(parameter.name)
    return FunctionSpec(description, object_schema(properties, required), context, _binder(shapes))


def _parameter_shape(parameter: inspect.Parameter, hint: object, where: str) -> Shape:
    shape = shape_of(hint, f"{where}({parameter.name})")
    return accepting_null(shape) if parameter.default is None else shape


def _parameter_schema(
    shape: Shape, parameter: inspect.Parameter, documented: Mapping[str, str]
) -> dict[str, object]:
    schema = shape.schema
    if parameter.name in documented and "description" not in schema:
        schema = {**schema, "description": documented[parameter.name]}
    return with_default(schema, parameter.default)


def _unwrap_partial(fn: Callable[..., object]) -> tuple[Callable[..., object], frozenset[str]]:
    """The function a (nested) ``functools.partial`` calls, and the keywords it binds.

    That function holds the hints and the docstring; the partial's own
    signature (positional arguments removed) still decides the parameters, but
    it keeps keyword-bound ones, defaulting to their bound values.
    """
    bound: set[str] = set()
    while isinstance(fn, functools.partial):
        bound.update(fn.keywords)
        fn = fn.func
    return fn, frozenset(bound)


def _binder(shapes: dict[str, Shape]) -> Callable[[Mapping[str, object]], dict[str, object]]:
    def bind(arguments: Mapping[str, object]) -> dict[str, object]:
        try:
            return {
                name: shapes[name].coerce(value)
                for name, value in arguments.items()
                if name in shapes
            }
        except Exception as exc:
            parts = ((n, shapes[n].coerce, v) for n, v in arguments.items() if n in shapes)
            raise_located(parts, exc)

    return bind
