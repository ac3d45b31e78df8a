"""JSON schema and argument binding from a function's signature, type hints and docstring."""

from __future__ import annotations

import contextlib
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Union, final

import attrs

from retinue._lossless import thaw_json
from retinue._naming import code_name

from ._annotations import refuse_field_default
from ._defs import with_definitions
from ._docstring import parse_docstring
from ._each import LEAVES, converter, raise_each
from ._hints import HintTooDeepError, parameter_hints, unwrap
from ._inhabited import check_finite
from ._keywords import PROPERTY_NAME_RULE, is_property_name
from ._paths import first_step
from ._record_init import BY_NAME
from ._schema_depth import check_depth
from ._shapes import (
    EMPTY,
    Shape,
    accepting_null,
    object_schema,
    shape_of,
    type_schema,
    unpacked_fields,
    with_default,
)
from ._tool import Tool, ToolContext, layers
from ._wrappers import check_takes_what_it_shows, shown_by

__all__ = ["FunctionSpec", "RestBinder", "ShapeBinder", "describe", "type_schema"]

_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
_VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD


@final
@attrs.frozen
class FunctionSpec:
    """What the ``@tool`` decorator learns from a function."""

    description: str
    parameters: dict[str, object]
    context_parameter: str | None
    bind: Callable[[Mapping[str, object]], dict[str, object]]
    # The **kwargs parameter whose schema is the parameters' additionalProperties, if any.
    rest_parameter: str | None = None


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

    A record its parameters use more than once, or inside itself, is described once
    under the schema's ``"$defs"``.

    Raises:
        TypeError: a parameter kind or type hint the schema cannot express, or
            a method whose instance the model would supply.
        ValueError: a parameter name providers refuse as a property name.
    """
    spec, definitions = with_definitions(lambda: _function_spec(fn))
    where = code_name(fn)
    check_depth(spec.parameters, definitions, where, spec.rest_parameter)
    if not definitions:
        return spec
    check_finite(spec.parameters, definitions, where)
    return attrs.evolve(spec, parameters={**spec.parameters, "$defs": definitions})


def _function_spec(fn: Callable[..., object]) -> FunctionSpec:
    _check_not_class_method(fn)
    where = code_name(fn)
    signature = _signature(fn, where)
    target, bound = _unwrap_partial(fn)
    _check_not_unbound_method(fn, signature, bound)
    shown = shown_by(target)
    hints = parameter_hints(_hinted(shown), where)
    description, documented = parse_docstring(_docstring(shown))
    found = _Properties(documented)
    context, rest = _read_parameters(signature, hints, bound, found, where)
    check_takes_what_it_shows(fn, signature, context, where)
    schema = object_schema(found.properties, found.required)
    if rest is None:
        return FunctionSpec(description, schema, context, ShapeBinder(found.shapes))
    name, shape = rest
    reserved = _reserved_names(target, bound, context, found.properties)
    extra = _parameter_schema(shape, signature.parameters[name], documented)
    schema = _open_to(schema, _naming_refused(extra, reserved))
    binder = RestBinder(found.shapes, shape, reserved)
    return FunctionSpec(description, schema, context, binder, rest_parameter=name)


def _read_parameters(
    signature: inspect.Signature,
    hints: Mapping[str, object],
    bound: frozenset[str],
    found: _Properties,
    where: str,
) -> tuple[str | None, tuple[str, Shape] | None]:
    """Add each parameter the model fills to *found*; the ``ToolContext`` parameter's name,
    and the ``**kwargs`` parameter's name and shape unless it unpacks a TypedDict.

    Raises:
        TypeError: a ``*args`` parameter, or more than one ``ToolContext`` parameter.
    """
    context: str | None = None
    rest: tuple[str, Shape] | None = None
    for parameter in signature.parameters.values():
        if parameter.name in bound:
            continue  # the partial's value: not the model's to see (a key?) nor to override
        if parameter.kind is _VAR_POSITIONAL:
            # A JSON object has only names: nothing could fill it.
            raise TypeError(
                f"{where}: *args parameter {parameter.name!r} cannot be a tool argument"
            )
        hint = hints.get(parameter.name, parameter.annotation)
        if parameter.kind is _VAR_KEYWORD:
            with _refusing_too_deep(f"{where}({parameter.name})"):
                unpacked = found.unpack(hint, parameter.name, signature, bound, where)
            if not unpacked:
                rest = parameter.name, _parameter_shape(parameter, hint, where)
        elif _is_context(unwrap(hint)[0], f"{where}({parameter.name})"):
            if context is not None:
                raise TypeError(f"{where}: more than one ToolContext parameter")
            context = parameter.name
        else:
            _check_property_name(parameter.name, where)
            shape = _parameter_shape(parameter, hint, where)
            schema = _parameter_schema(shape, parameter, found.documented)
            found.add(parameter.name, shape, schema, needed=parameter.default is EMPTY)
    return context, rest


@final
@attrs.define
class _Properties:
    """The properties a function's parameters make, in order: shapes, schemas, required names."""

    documented: Mapping[str, str]
    shapes: dict[str, Shape] = attrs.field(factory=dict)
    properties: dict[str, object] = attrs.field(factory=dict)
    required: list[str] = attrs.field(factory=list)

    def add(self, name: str, shape: Shape, schema: dict[str, object], *, needed: bool) -> None:
        self.shapes[name] = shape
        self.properties[name] = schema
        if needed:
            self.required.append(name)

    def unpack(
        self,
        hint: object,
        parameter: str,
        signature: inspect.Signature,
        bound: frozenset[str],
        where: str,
    ) -> bool:
        """Add the keys of ``**parameter: Unpack[TD]``; whether *hint* is such an ``Unpack``.

        A key a partial binds is left out, as a bound parameter is: its value
        is the partial's (a required key is filled by it), so the model
        neither sees it nor may send it.
        """
        fields = unpacked_fields(hint, f"{where}({parameter})")
        for name, shape, needed in fields or ():
            if name in bound:
                continue
            _check_property_name(name, where)
            if name in signature.parameters:
                # Python binds the key to that parameter: **kwargs would never get it.
                raise TypeError(
                    f"{where}: **{parameter} unpacks key {name!r}, which is also a parameter"
                )
            self.add(name, shape, _described(shape.schema, name, self.documented), needed=needed)
        return fields is not None


def _signature(fn: Callable[..., object], where: str) -> inspect.Signature:
    """*fn*'s signature, which the schema is read from.

    Raises:
        TypeError: *fn* is already a :class:`Tool`, or has no signature to read.
    """
    if isinstance(fn, Tool):
        raise TypeError(
            f"tool {fn.name!r} is already a Tool: apply @tool once, with all its options"
        )
    try:
        return inspect.signature(fn)
    except ValueError as exc:  # a builtin that does not say what it takes
        raise TypeError(f"{where}: no signature to read its parameters from ({exc})") from exc


def _open_to(schema: dict[str, object], extra: dict[str, object]) -> dict[str, object]:
    """*schema* taking other properties of schema *extra*; an empty one takes any value."""
    schema = {k: v for k, v in schema.items() if k != "additionalProperties"}
    if extra:
        schema["additionalProperties"] = extra
    return schema


def _naming_refused(schema: dict[str, object], reserved: frozenset[str]) -> dict[str, object]:
    """*schema* of the other properties, its description naming the *reserved* keys.

    Told in words: the keyword for it (``propertyNames`` with a ``not``) is one the
    providers' strict modes refuse, and one the argument check's fast path leaves to
    the reference validator on every call.
    """
    if not reserved:
        return schema
    *rest, last = (f'"{name}"' for name in sorted(reserved))
    names = f"{', '.join(rest)} or {last}" if rest else last
    told = f"Never named {names}."
    said = schema.get("description")
    if isinstance(said, str) and said.strip():
        said = said.rstrip()
        told = f"{said} {told}" if said.endswith((".", "!", "?")) else f"{said}. {told}"
    return {**schema, "description": told}


def _reserved_names(
    target: object, bound: frozenset[str], context: str | None, properties: Mapping[str, object]
) -> frozenset[str]:
    """The keys ``**kwargs`` must not take: they would fill or override another parameter.

    A partial's keywords, the ``ToolContext`` parameter, a parameter a partial
    filled by position, and the ``self`` or ``cls`` a bound method or a callable
    object fills: named again, it would be passed twice.
    """
    named: set[str] = set()
    for function in _called_functions(target):
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):  # no signature: what it takes is unknown
            continue
        named.update(p.name for p in parameters if p.kind in BY_NAME)
    taken = named | bound | ({context} if context is not None else set())
    return frozenset(taken - properties.keys())


def _called_functions(target: object) -> list[Callable[..., object]]:
    """*target*, and the function it calls with its instance or class filled in, if any."""
    functions = [typing.cast("Callable[..., object]", target)]
    if inspect.ismethod(target):
        functions.append(target.__func__)
    elif not inspect.isroutine(target) and callable(target):
        functions.append(type(target).__call__)
    return functions


def _hinted(target: object) -> object:
    """What holds the hints of calling *target*: itself, a class's constructor, or an object's
    ``__call__``.

    A class's own hints are its attributes'; its parameters' are its metaclass's
    ``__call__``'s, its ``__init__``'s or its ``__new__``'s, where ``inspect.signature``
    reads them from: under ``from __future__
    import annotations`` the signature holds only their unresolved text.
    """
    if inspect.isroutine(target):
        return target
    if isinstance(target, type):
        cls: Any = target  # its constructor, as the class's own: no instance's
        call = type(cls).__call__
        if call is not type.__call__:  # a metaclass's __call__ comes first, as for inspect
            return call
        if cls.__init__ is not object.__init__:
            return cls.__init__
        return cls.__new__ if cls.__new__ is not object.__new__ else target
    return type(target).__call__


def _docstring(target: object) -> str | None:
    """What documents calling *target*: a callable object's ``__call__``, else its class."""
    if inspect.isroutine(target) or isinstance(target, type):
        return inspect.getdoc(target)
    # Its own, not inherited: inspect.getdoc would find ``type.__call__``'s through ``object``.
    called = getattr(type(target).__call__, "__doc__", None)
    return (inspect.cleandoc(called) if isinstance(called, str) else None) or inspect.getdoc(target)


def _check_property_name(name: str, where: str) -> None:
    if not is_property_name(name):
        raise ValueError(
            f"{where}: invalid parameter name {name!r} for a tool argument: {PROPERTY_NAME_RULE}"
        )


def _check_not_unbound_method(
    fn: Callable[..., object],
    signature: inspect.Signature,
    bound: frozenset[str],
) -> None:
    """Refuse a function defined in a class body whose instance slot the model would fill.

    Decorated in the class body (or taken from the class), a method's ``self``
    is no bound object but a parameter like any other: advertised to the
    model, which could send whatever object the body trusts.

    Raises:
        TypeError: *fn* is such a method.
    """
    function = _innermost_function(fn)
    if function is None or not _defined_in_class_body(function):
        return
    slot = next(iter(inspect.signature(function).parameters.values()), None)
    if (
        slot is None
        or slot.kind not in (slot.POSITIONAL_ONLY, slot.POSITIONAL_OR_KEYWORD)
        or slot.name not in signature.parameters
        or slot.name in bound
        # The convention, not the class: while the class body runs there is none to ask.
        or slot.name not in ("self", "cls")
    ):
        return
    dispatcher = getattr(getattr(fn, "register", None), "__self__", None)
    if isinstance(dispatcher, functools.singledispatchmethod):
        # Bound, it is a plain function wrapping the method, which shows its slot still.
        raise TypeError(
            f"{function.__qualname__} is a functools.singledispatchmethod: bound too, its "
            f"{slot.name!r} would be an argument the model supplies; make a tool of a "
            "method that calls it"
        )
    raise TypeError(
        f"{function.__qualname__} is a method: its {slot.name!r} would be an argument the "
        f"model supplies; decorate the bound method instead (tool(instance."
        f"{function.__name__})), or, for a static method, apply @tool above @staticmethod"
    )


def _check_not_class_method(fn: object) -> None:
    """Refuse a class method object: ``@tool`` above ``@classmethod`` in a class body.

    While the class body runs there is no class to bind its first parameter
    to; the class method bound to its class, taken after the body, is a tool.

    Raises:
        TypeError: *fn* is a ``classmethod`` object.
    """
    if not isinstance(fn, classmethod):
        return
    function = fn.__func__
    qualname = code_name(function)
    parts = qualname.split(".")
    owner = parts[-2] if len(parts) > 1 and parts[-2] != "<locals>" else "TheClass"
    name = getattr(function, "__name__", parts[-1])
    raise TypeError(
        f"{qualname} is a class method: in its class body there is no class yet to bind "
        f"its first parameter to; make it a tool after the class body, bound to its class "
        f"(tool({owner}.{name}))"
    )


def _innermost_function(fn: object) -> types.FunctionType | None:
    """The plain function under partials and ``__wrapped__`` links, if it may be a method.

    ``None`` past a bound method (its first parameter is filled) or a static
    method (it has none to fill); both lend their function as ``__wrapped__``,
    so they are recognised before that link is followed.
    """
    innermost: object = None
    for layer in layers(fn):
        if inspect.ismethod(layer) or isinstance(layer, staticmethod):
            return None
        innermost = layer
    return innermost if isinstance(innermost, types.FunctionType) else None


def _defined_in_class_body(function: types.FunctionType) -> bool:
    """Whether the function's qualified name is ``Class.name`` (not ``outer.<locals>.name``)."""
    parts = function.__qualname__.split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


def _parameter_shape(parameter: inspect.Parameter, hint: object, where: str) -> Shape:
    refuse_field_default(parameter.default, f"{where}({parameter.name})")
    with _refusing_too_deep(f"{where}({parameter.name})"):
        shape = shape_of(hint, f"{where}({parameter.name})")
    return accepting_null(shape) if parameter.default is None else shape


@contextlib.contextmanager
def _refusing_too_deep(where: str) -> Iterator[None]:
    """Refuse a hint nested past Python's stack as nested too deeply, naming the parameter
    rather than the part of it (a path of kilobytes) where the stack ran out."""
    try:
        yield
    except (RecursionError, HintTooDeepError):
        raise HintTooDeepError(where) from None


def _parameter_schema(
    shape: Shape, parameter: inspect.Parameter, documented: Mapping[str, str]
) -> dict[str, object]:
    described = _described(shape.schema, parameter.name, documented)
    return with_default(described, parameter.default, shape.coerce)


def _described(
    schema: dict[str, object], name: str, documented: Mapping[str, str]
) -> dict[str, object]:
    if name in documented and "description" not in schema:
        return {**schema, "description": documented[name]}
    return schema


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


@final
@attrs.frozen(eq=False)
class ShapeBinder:
    """The decorator's binder: each parameter's value converted by its shape.

    It takes the arguments plain or frozen, thawing each container value
    itself, so a call's frozen arguments need no plain copy made first.
    """

    shapes: dict[str, Shape]

    # Any: a call's values are JsonValue, a caller's own plain ones are not typed as such.
    def __call__(self, arguments: Mapping[str, Any]) -> dict[str, object]:
        shapes = self.shapes
        bound: dict[str, object] = {}
        for name, value in arguments.items():
            shape = shapes.get(name)
            if shape is not None:
                try:
                    bound[name] = shape.coerce(value if type(value) in LEAVES else thaw_json(value))
                except Exception as exc:
                    raise_each(name, exc, arguments, converter(shapes))
        return bound


@final
@attrs.frozen(eq=False)
class RestBinder:
    """The binder of a function taking ``**kwargs``: a key that is no parameter goes there.

    Converted by the ``**kwargs`` annotation's shape; a key that would fill a
    parameter the model does not supply (*reserved*) is refused.
    """

    shapes: dict[str, Shape]
    rest: Shape
    reserved: frozenset[str]

    def __call__(self, arguments: Mapping[str, Any]) -> dict[str, object]:
        for name in arguments:
            if name in self.reserved:
                raise ValueError(f"{first_step(name)}: unexpected property")
        bound: dict[str, object] = {}
        for name, value in arguments.items():
            shape = self.shapes.get(name, self.rest)
            try:
                bound[name] = shape.coerce(value if type(value) in LEAVES else thaw_json(value))
            except Exception as exc:
                raise_each(str(name), exc, arguments, converter(self.shapes, self.rest))
        return bound
