"""JSON schema of one type hint, and the conversion of validated JSON into that type."""

from __future__ import annotations

import collections.abc
import contextlib
import contextvars
import enum
import inspect
import types
import typing
from collections.abc import Iterator
from functools import partial
from typing import Annotated, Literal, NotRequired, Required, Union

import attrs

from ._annotations import (
    checking,
    json_kinds,
    metadata_keywords,
    refuse_field_default,
    refuse_foreign_aliases,
    with_keywords,
)
from ._defs import defs_root, shared_record, with_definitions
from ._hashable import unhashable
from ._hints import (
    arguments_of,
    generic_record,
    is_read_only,
    is_record_class,
    is_type_alias,
    is_typeddict,
    resolve_hints,
    substituted,
    unwrap,
)
from ._located import (
    Shape,
    constructor_failure,
    converted_fields,
    converted_items,
    converted_keys,
    items_of,
    keeping_refusals,
    member_check,
    note_refused,
    pairs_of,
    raise_at,
    refused_before,
)
from ._paths import key_step
from ._record_init import EMPTY, init_fields, with_default
from ._satisfiable import unsatisfiable
from ._scalar_shapes import PRIMITIVES, enum_shape, literal_shape, primitive_shape
from ._tool import ToolContext
from ._validate import conforms, json_type_name, validate

__all__ = [
    "EMPTY",
    "Shape",
    "accepting_null",
    "object_schema",
    "shape_of",
    "type_schema",
    "unpacked_fields",
    "with_default",
]

# The body gets a list for each but a tuple: one is each of these.
_SEQUENCES = (
    list,
    tuple,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Collection,
    collections.abc.Iterable,
)
_TYPING = ("typing", "typing_extensions")
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
# Each set type and the type a body gets for it.
_SETS: dict[object, type[set[object] | frozenset[object]]] = {
    set: set,
    frozenset: frozenset,
    collections.abc.Set: frozenset,
    collections.abc.MutableSet: set,
}


# The records (TypedDicts, attrs classes, dataclasses) being described, outermost first.
_OPEN_RECORDS: contextvars.ContextVar[tuple[object, ...]] = contextvars.ContextVar(
    "_OPEN_RECORDS", default=()
)


def _identity(value: object) -> object:
    return value


def type_schema(hint: object) -> dict[str, object]:
    """Return the JSON schema of one type hint (raises ``TypeError`` if unsupported).

    A record it holds more than once, or inside itself, is described once under its
    ``"$defs"``.
    """
    schema, definitions = with_definitions(lambda: shape_of(hint, "type").schema)
    return {**schema, "$defs": definitions} if definitions else schema


def shape_of(hint: object, where: str) -> Shape:
    hint, metadata = unwrap(substituted(hint))
    shape = _bare_shape(hint, where)
    if not metadata:
        return shape
    refuse_foreign_aliases(hint, metadata, where)
    keywords = metadata_keywords(metadata, shape.schema, where)
    schema = with_keywords(shape.schema, keywords)
    empty = unsatisfiable(schema)
    if empty is not None:
        # Built, the tool would refuse every argument of the type the bounds are about.
        raise ValueError(f"{where}: its bounds leave no valid value: {empty}")
    return Shape(schema, checking(shape.coerce, metadata, shape.schema, where))


def _bare_shape(hint: object, where: str) -> Shape:
    if hint is EMPTY or hint is typing.Any or hint is object:
        return Shape({})
    if hint is None or hint is type(None):
        return Shape({"type": "null"})
    if isinstance(hint, typing.NewType):
        # A NewType is its supertype at run time: described and built as that.
        return shape_of(hint.__supertype__, where)
    if is_type_alias(hint):
        # Its value is read once here; an alias naming itself in it is refused as recursive.
        with _describing(hint, where):
            return shape_of(typing.cast("typing.Any", hint).__value__, where)
    if hint in PRIMITIVES:
        return primitive_shape(hint)
    origin = typing.get_origin(hint)
    if origin is Literal:
        return literal_shape(typing.get_args(hint), where)
    if origin is Union or origin is types.UnionType:
        return _union(typing.get_args(hint), where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return enum_shape(hint, where)
    if hint in _SEQUENCES or origin in _SEQUENCES:
        return _array(hint, origin, where)
    if hint in _MAPPINGS or origin in _MAPPINGS:
        return _mapping(typing.get_args(hint), where)
    if hint in _SETS or origin in _SETS:
        return _set(_SETS[origin if origin in _SETS else hint], typing.get_args(hint), where)
    if is_typeddict(hint):
        return shared_record(hint, lambda: _record_shape(hint, hint, where))
    if hint is ToolContext:
        # As a record the model could forge one: only a parameter of its own is injected.
        raise TypeError(
            f"{where}: ToolContext is injected only as a parameter of its own type "
            "(ToolContext or ToolContext | None), never inside another type"
        )
    if is_record_class(hint):
        return shared_record(hint, lambda: _record_shape(hint, hint, where))
    record = generic_record(hint)
    if record is not None:
        return shared_record(hint, lambda: _record_shape(hint, record, where))
    raise TypeError(f"{where}: unsupported type {hint!r} in a tool signature{_advice(hint)}")


def _advice(hint: object) -> str:
    """What to do instead of a hint of a class that writes its own schema (pydantic's)."""
    # Looked up statically: a class's attribute lookup may run code of its own.
    if inspect.getattr_static(hint, "model_json_schema", None) is None:
        return ""
    # type's own descriptor: a metaclass may answer __name__ itself.
    name = type.__dict__["__name__"].__get__(hint) if isinstance(hint, type) else "Model"
    # Said for any place of the hint (a list of models, one parameter of several): the
    # parameters' schema holds the model's where the signature holds the model.
    return (
        ": @tool does not read a model's own schema (model_json_schema): build "
        "Tool(name, description, parameters, fn), its parameters' schema holding "
        f"{name}.model_json_schema() where the signature holds {name}, and fn making "
        f"the {name} from the arguments"
    )


def _record_shape(hint: object, record: object, where: str) -> Shape:
    """A record's keys or fields, described once: *record* is *hint* itself, or the class of
    a generic one (``Box[int]``: Box's fields, its type variable read as int)."""
    with _describing(hint, where), arguments_of(hint, where):
        if is_typeddict(record):
            return _typed_dict_fields(record, where)
        assert isinstance(record, type)
        return _record_fields(record, where)


def _nullable(schema: dict[str, object]) -> dict[str, object]:
    if not schema:
        return schema
    options = schema.get("anyOf")
    if isinstance(options, list) and schema.keys() == {"anyOf"}:
        return {"anyOf": [*options, {"type": "null"}]}
    kind = schema.get("type")
    if isinstance(kind, str | list) and "anyOf" not in schema:
        names = [kind] if isinstance(kind, str) else list(kind)
        out = {**schema, "type": [*names, "null"] if "null" not in names else names}
        enum_values = schema.get("enum")
        if isinstance(enum_values, list) and None not in enum_values:
            out["enum"] = [*enum_values, None]
        return out
    return {"anyOf": [schema, {"type": "null"}]}


def accepting_null(shape: Shape) -> Shape:
    """*shape*, nullable: ``x: int = None`` is the implicit ``int | None`` of older Pythons."""
    if validate(None, shape.schema, root=defs_root()) is None:
        return shape
    # The description stays beside the schema rather than inside one branch of an anyOf.
    schema = dict(shape.schema)
    description = schema.pop("description", None)
    nullable = _nullable(schema)
    if description is not None:
        nullable = {**nullable, "description": description}
    return Shape(nullable, lambda v: None if v is None else shape.coerce(v))


def _union(args: tuple[object, ...], where: str) -> Shape:
    members = [a for a in args if a is not type(None)]
    nullable = len(members) < len(args)
    if len(members) == 1:
        inner = shape_of(members[0], where)
        schema = _nullable(inner.schema) if nullable else inner.schema
        return Shape(schema, lambda v: None if v is None else inner.coerce(v))
    shapes = [shape_of(member, where) for member in members]
    options = [s.schema for s in shapes] + ([{"type": "null"}] if nullable else [])
    kinds = [json_kinds(s.schema) for s in shapes]
    root = defs_root() or {}  # where a member's $ref leads: filled in before any call

    def first_taking(value: object) -> object:
        # The first member that takes the value, its checks (a Predicate) included; one
        # of the value's own JSON type before the others: ``float | int`` keeps an int
        # (a float would round it past 2**53), ``int | float`` the float 2.0.
        own = json_type_name(value)
        ordered = [s for s, k in zip(shapes, kinds, strict=True) if own in k]
        ordered += [s for s, k in zip(shapes, kinds, strict=True) if own not in k]
        refused: Exception | None = None
        for shape in ordered:
            if conforms(value, shape.schema, member_check(root)):
                known = refused_before(value, shape)
                if known is not None:
                    refused = refused or known
                    continue
                try:
                    return shape.coerce(value)
                except Exception as exc:  # the next member may take it
                    note_refused(value, shape, exc)
                    refused = refused or exc
        if refused is not None:
            raise refused
        return value

    return Shape({"anyOf": options}, partial(keeping_refusals, first_taking))


def _array(hint: object, origin: object, where: str) -> Shape:
    args = typing.get_args(hint)
    if origin is tuple or hint is tuple:
        # ``tuple[()]`` holds its empty arguments (a bare ``Tuple`` holds none): fixed too.
        fixed = not args and getattr(hint, "__args__", None) == ()
        if fixed or (args and (len(args) != 2 or args[1] is not Ellipsis)):
            raise TypeError(f"{where}: fixed-length tuples are not supported; use tuple[X, ...]")
        args = args[:1]
    if not args:
        # ``items: {}`` (any item) rather than none: providers refuse an array without items.
        return Shape(
            {"type": "array", "items": {}}, _to_tuple if tuple in (hint, origin) else _identity
        )
    item = shape_of(args[0], f"{where}[]")
    schema: dict[str, object] = {"type": "array", "items": item.schema}

    def coerce_items(value: object) -> list[object]:
        return converted_items(item.coerce, items_of(value))

    if tuple in (hint, origin):
        return Shape(schema, lambda v: tuple(coerce_items(v)))
    return Shape(schema, coerce_items)


def _set(
    kind: type[set[object] | frozenset[object]], args: tuple[object, ...], where: str
) -> Shape:
    """A JSON array of distinct items, given to the body as *kind* (a set or a frozenset)."""
    if not args:
        raise TypeError(f"{where}: a set needs its item type (set[str]): JSON arrays hold lists")
    # Described first: a generic record growing inside itself (Grow[list[T]]) is refused
    # there, where the hashability check would follow it for ever.
    item = shape_of(args[0], f"{where}[]")
    problem = unhashable(args[0])
    if problem is not None:
        raise TypeError(f"{where}: set items must be hashable, but {problem}")

    def coerce(value: object) -> object:
        converted = converted_items(item.coerce, items_of(value))
        distinct = kind(converted)
        if len(distinct) < len(converted):
            # Distinct in JSON, equal once converted (``1`` and ``true`` both in a set[int | bool]).
            raise ValueError(_repeated(converted))
        return distinct

    return Shape({"type": "array", "items": item.schema, "uniqueItems": True}, coerce)


def _repeated(items: list[object]) -> str:
    """Which of the converted *items*, hashable all, repeats which."""
    first: dict[object, int] = {}
    for index, item in enumerate(items):
        seen = first.setdefault(item, index)
        if seen != index:
            return (
                f"array items must be unique, as items of a set, but [{index}] equals "
                f"[{seen}] once converted"
            )
    return "array items must be unique, as items of a set"


def _to_tuple(value: object) -> object:
    return tuple(items_of(value))


def _mapping(args: tuple[object, ...], where: str) -> Shape:
    if not args:
        return Shape({"type": "object"})
    key = _key_shape(args[0], where)
    value = shape_of(args[1], f"{where}{{}}")
    schema: dict[str, object] = {"type": "object"}
    if key.schema:
        schema["propertyNames"] = key.schema
    if value.schema:
        schema["additionalProperties"] = value.schema

    def coerce(v: object) -> object:
        pairs = pairs_of(v)
        keys = converted_keys(key.coerce, pairs)  # all keys first: a refused name comes first
        converted: dict[object, object] = {}
        for (name, item), converted_key in zip(pairs, keys, strict=True):
            try:
                converted[converted_key] = value.coerce(item)
            except Exception as exc:
                raise_at(key_step(name), exc)
        return converted

    return Shape(schema, coerce)


def _key_shape(hint: object, where: str) -> Shape:
    """The shape of a mapping's keys: a ``propertyNames`` schema (``{}``: any name).

    Any hint of strings alone (a ``Literal`` of them, an enum of str values, a
    ``NewType`` of ``str``, an ``Annotated`` pattern or length) describes them, and
    its bounds are checked, not dropped; its ``"type": "string"`` goes without saying.

    Raises:
        TypeError: *hint* allows a value that is no string, which no key of a JSON object is.
    """
    shape = shape_of(hint, f"{where}{{key}}")
    if json_kinds(shape.schema) != {"string"}:
        raise TypeError(f"{where}: object keys must be str, got {hint!r}")
    names = {keyword: v for keyword, v in shape.schema.items() if keyword != "type"}
    return Shape(names, shape.coerce)


def object_schema(properties: dict[str, object], required: list[str]) -> dict[str, object]:
    schema: dict[str, object] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


@contextlib.contextmanager
def _describing(cls: object, where: str) -> Iterator[None]:
    """Mark *cls* as open while its fields are described.

    Raises:
        TypeError: *cls* is already open: it contains itself, and a JSON schema
            without references cannot express it.
    """
    open_records = _OPEN_RECORDS.get()
    if cls in open_records or _grows_inside_itself(cls, open_records):
        name = getattr(cls, "__qualname__", repr(cls))
        raise TypeError(f"{where}: recursive type {name} is not supported in a tool signature")
    token = _OPEN_RECORDS.set((*open_records, cls))
    try:
        yield
    finally:
        _OPEN_RECORDS.reset(token)


# How many times one generic record may be open inside itself (Box[Box[int]] twice)
# before it is taken for one whose fields hold it with ever larger arguments.
_NESTED_GENERICS = 8


def _grows_inside_itself(hint: object, open_records: tuple[object, ...]) -> bool:
    """Whether generic record *hint* is open inside itself too often to be anything but
    a field holding it with larger arguments each time (``Grow[list[T]]`` in ``Grow[T]``)."""
    origin = typing.get_origin(hint)
    if origin is None:
        return False
    return sum(typing.get_origin(other) is origin for other in open_records) >= _NESTED_GENERICS


def _typed_dict_fields(cls: object, where: str) -> Shape:
    keys = _typed_dict_keys(cls, where)
    shapes = {name: shape for name, shape, _required in keys}
    properties: dict[str, object] = {name: shape.schema for name, shape, _required in keys}
    required = [name for name, _shape, is_required in keys if is_required]

    def coerce(value: object) -> object:
        return converted_fields(shapes, pairs_of(value), keep_others=True)

    return Shape(object_schema(properties, required), coerce)


def _typed_dict_keys(cls: object, where: str) -> list[tuple[str, Shape, bool]]:
    """Each key of TypedDict *cls*: its name, its shape and whether it is required."""
    hints = resolve_hints(cls, where)
    required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    return [
        (name, shape_of(hint, f"{where}.{name}"), _is_required_key(name, hint, required_keys))
        for name, hint in hints.items()
    ]


def unpacked_fields(hint: object, where: str) -> list[tuple[str, Shape, bool]] | None:
    """The keywords ``**kwargs: Unpack[TD]`` takes: each key's name, shape and whether it is
    required; ``None`` for any other ``**kwargs`` hint.

    Raises:
        TypeError: ``Unpack`` of something that is not a ``TypedDict``.
    """
    origin = typing.get_origin(hint)
    # typing_extensions has an Unpack of its own before Python 3.12.
    if getattr(origin, "_name", None) != "Unpack" or origin.__module__ not in _TYPING:
        return None
    (unpacked,) = typing.get_args(hint)
    cls = generic_record(unpacked) or unpacked  # Page of Page[int]: its keys, T read as int
    if not is_typeddict(cls):
        raise TypeError(f"{where}: **kwargs may unpack only a TypedDict, not {unpacked!r}")
    with _describing(unpacked, where), arguments_of(unpacked, where):
        return _typed_dict_keys(cls, where)


def _is_required_key(name: str, hint: object, required_keys: frozenset[str]) -> bool:
    """Read ``(Not)Required`` from the hint too: stringified annotations hide it from the class."""
    while typing.get_origin(hint) is Annotated or is_read_only(typing.get_origin(hint)):
        hint = typing.get_args(hint)[0]
    origin = typing.get_origin(hint)
    if origin is NotRequired:
        return False
    return origin is Required or name in required_keys


def _record_fields(cls: type[object], where: str) -> Shape:
    shapes: dict[str, Shape] = {}
    properties: dict[str, object] = {}
    required: list[str] = []
    for field in init_fields(cls, where):
        refuse_field_default(field.default, f"{where}.{field.name}")
        shape = shape_of(field.hint, f"{where}.{field.name}")
        if field.default is None:
            # As for a parameter: the schema would name null as the default yet refuse it.
            shape = accepting_null(shape)
        shapes[field.name] = shape
        properties[field.name] = with_default(shape.schema, field.default, shape.coerce)
        if field.default is attrs.NOTHING:
            required.append(field.name)

    def coerce(value: object) -> object:
        fields = converted_fields(shapes, pairs_of(value), keep_others=False)
        # A refusal of the class itself (a validator) is placed by the caller: at the record.
        try:
            return cls(**fields)
        except BaseException as exc:
            failure = constructor_failure(cls, exc)
            if failure is exc:
                raise
            raise failure from exc

    return Shape(object_schema(properties, required), coerce)
