"""What a record's constructor takes, field by field, and the JSON default a schema shows."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import typing
from collections.abc import Callable
from typing import NamedTuple

import attrs

from retinue._errors import InvalidJsonError
from retinue._jsonschema import is_array
from retinue._lossless import JsonValue, freeze_json, thaw_json

from ._annotations import json_kinds
from ._defs import defs_root, when_built
from ._hints import is_named_tuple, record_hints
from ._located import Coerce
from ._validate import validate

__all__ = ["BY_NAME", "EMPTY", "InitField", "init_fields", "with_default"]

EMPTY = inspect.Parameter.empty
BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
"""The kinds of parameter a call may pass by name."""
_REST = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


class InitField(NamedTuple):
    """One argument of a record's constructor, as its schema needs it."""

    name: str
    hint: object
    default: object
    """``attrs.NOTHING`` when required; ``EMPTY`` when built by a factory (none shown)."""


def init_fields(cls: type[object], where: str) -> list[InitField]:
    """The fields an attrs class, a dataclass or a ``NamedTuple`` takes in its constructor,
    with their hints.

    Each taken as (attribute, parameter, default, hint without an annotation): an
    untyped attrs field (``x = attr.ib()``) takes any value, like a bare parameter.
    """
    if attrs.has(cls):
        taken = [
            (field.name, field.alias, field.default, EMPTY if field.type is None else field.type)
            for field in attrs.fields(cls)
            if field.init
        ]
    elif is_named_tuple(cls):
        defaults = typing.cast("dict[str, object]", typing.cast("typing.Any", cls)._field_defaults)
        names: tuple[str, ...] = typing.cast("typing.Any", cls)._fields
        taken = [(name, name, defaults.get(name, attrs.NOTHING), EMPTY) for name in names]
    else:
        fields = dataclasses.fields(typing.cast("type[typing.Any]", cls))
        taken = [(f.name, f.name, _dataclass_default(f), EMPTY) for f in fields if f.init]
    _check_constructor(cls, {parameter for _, parameter, *_ in taken}, where)
    hints = record_hints(cls, {name for name, *_ in taken}, where)
    if attrs.has(cls):
        hints.update(_converted_hints(cls))
    return [
        InitField(parameter, hints.get(name, untyped), default)
        for name, parameter, default, untyped in taken
    ]


def _converted_hints(cls: type[attrs.AttrsInstance]) -> dict[str, object]:
    """What the constructor takes for each attrs field whose converter says so.

    A converter's annotated argument is what the caller gives (a ``list[str]``
    for a ``frozenset[str]`` field); an unannotated one leaves the field's type.
    """
    hints: dict[str, object] = {}
    for field in attrs.fields(cls):
        converter = field.converter
        if field.init and converter is not None:
            hint = _argument_hint(getattr(converter, "converter", converter))
            if hint is not EMPTY:
                hints[field.name] = hint
    return hints


def _argument_hint(function: object) -> object:
    """The resolved hint of *function*'s first parameter, or ``EMPTY``."""
    try:
        first = next(
            iter(inspect.signature(typing.cast("Callable[..., object]", function)).parameters)
        )
        return typing.get_type_hints(function, include_extras=True).get(first, EMPTY)
    except Exception:  # a builtin without a signature, a hint that does not resolve, no argument
        return EMPTY


def _check_constructor(cls: type[object], fields: set[str], where: str) -> None:
    """Refuse a record whose constructor does not take exactly its fields by name.

    Its fields make the schema, and the body's value is ``cls(**fields)``: a
    parameter that is no field (an ``InitVar``, or one of an ``__init__`` of its
    own) would never be given, and a field the constructor does not take by
    name would be refused on every call that gives it. A parameter with a default
    that is no field is left to its default.
    """
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # what it takes is unknown
        return
    named = {p.name for p in parameters if p.kind in BY_NAME}
    # One with a default needs no value from the model: only a required one is never given.
    needed = {p.name for p in parameters if p.kind not in _REST and p.default is EMPTY}
    others = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    # **kwargs take any field by name, but for one that is positional-only.
    positional = {p.name for p in parameters if p.kind is inspect.Parameter.POSITIONAL_ONLY}
    unlisted, untaken = needed - fields, fields & positional if others else fields - named
    name = cls.__qualname__
    if unlisted:
        # An InitVar is described in the dataclass's fields but is none of them.
        kind = "an InitVar" if unlisted & set(getattr(cls, "__dataclass_fields__", ())) else None
        raise TypeError(
            f"{where}: {name} takes {', '.join(sorted(unlisted))} in its constructor as no "
            f"field ({kind or 'its own __init__'}): unsupported in a tool signature"
        )
    if untaken:
        raise TypeError(
            f"{where}: {name}'s constructor takes no {', '.join(sorted(untaken))} by name, "
            "a field its schema asks for: every call giving it would fail; unsupported in a "
            "tool signature"
        )


def _dataclass_default(field: dataclasses.Field[object]) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    return attrs.NOTHING if field.default_factory is dataclasses.MISSING else EMPTY


def _by_value(value: object, schema: object) -> object:
    """*value* with each enum member, in a list, tuple, set or dict too, replaced by its value,
    and each ``NamedTuple`` by the object of its fields, or by the array of them where
    *schema*, the part of the schema the value stands in, takes an array but no object.

    A set becomes a sorted list: the order is the same in every process, so is the schema.
    """
    if isinstance(value, enum.Enum):
        return value.value
    if is_named_tuple(type(value)) and not _takes_array_alone(schema):
        # Described as an object of its fields: so is its default.
        fields: dict[str, object] = value._asdict()  # type: ignore[attr-defined]
        return {name: _by_value(item, _property(schema, name)) for name, item in fields.items()}
    if isinstance(value, list | tuple):
        return [_by_value(item, _items(schema)) for item in value]
    if isinstance(value, set | frozenset):
        items = [_by_value(item, _items(schema)) for item in value]
        try:
            return sorted(items)  # type: ignore[type-var]
        except TypeError:  # items of more than one type
            return sorted(items, key=lambda item: (type(item).__name__, repr(item)))
    if isinstance(value, dict):
        return {key: _by_value(item, _property(schema, key)) for key, item in value.items()}
    return value


def _takes_array_alone(schema: object) -> bool:
    """Whether *schema* takes an array but no object: a tuple there is an array, not a record."""
    kinds = json_kinds(schema)
    return "array" in kinds and "object" not in kinds


def _members(schema: object) -> list[dict[str, object]]:
    """*schema* and the members of its ``anyOf``: where the schema of a part may be."""
    if not isinstance(schema, dict):
        return []
    members = schema.get("anyOf")
    return [schema, *(m for m in members if isinstance(m, dict))] if is_array(members) else [schema]


def _items(schema: object) -> object:
    """The schema of an array's items, if *schema* holds one array's (else ``None``: unknown)."""
    found = [member["items"] for member in _members(schema) if "items" in member]
    return found[0] if len(found) == 1 else None


def _property(schema: object, name: object) -> object:
    """The schema of an object's property *name*, if *schema* holds one (else ``None``)."""
    for member in _members(schema):
        properties = member.get("properties")
        if isinstance(properties, dict) and name in properties:
            return properties[name]
        if "additionalProperties" in member:
            return member["additionalProperties"]
    return None


def with_default(
    schema: dict[str, object], default: object, coerce: Coerce | None = None
) -> dict[str, object]:
    """Add a JSON-able ``default`` (enum members by value, in containers too) that *schema*
    takes, and *coerce* too (a ``Predicate``'s check); skip anything else.

    One refused (the stored value of a converted attrs field, a default of another type
    than its hint, one its check fails) would lead the model to send it, to be refused as
    invalid. It is judged once the schema is built: a ``$ref`` in it may lead to a record
    still being described, whose conversion is known only then.
    """
    if default is EMPTY or default is attrs.NOTHING or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return schema
    try:
        frozen = freeze_json(_by_value(default, schema))
    except (InvalidJsonError, RecursionError):
        return schema
    shown = {**schema, "default": thaw_json(frozen)}

    def judge() -> None:
        if not _taken(frozen, schema, coerce):
            del shown["default"]

    when_built(judge)
    return shown


def _taken(value: JsonValue, schema: dict[str, object], coerce: Coerce | None) -> bool:
    """Whether *schema* takes *value*, its ``$ref``s read in the schema built, and *coerce*
    converts it."""
    try:
        if validate(value, schema, root=defs_root()) is not None:
            return False
    except Exception:  # a malformed schema, which the tool's own check refuses, naming it
        return True
    if coerce is None:
        return True
    try:
        coerce(thaw_json(value))
    except Exception:  # what a call sending it would be refused for
        return False
    return True
