"""Schema keywords and checks from ``Annotated`` metadata: annotated-types and pydantic's ``Field``.

``Annotated[int, Field(ge=1, le=7, description="...")]`` and
``Annotated[str, MinLen(2), re.compile("^[a-z]+$")]`` say what an argument
may be; read by the attributes they carry (``gt``, ``ge``, ``lt``, ``le``,
``multiple_of``, ``min_length``, ``max_length``, ``pattern``,
``description``), not by their classes, so neither library is imported.
A pydantic ``FieldInfo`` holds its constraints in its ``metadata`` list.
annotated-types' ``Predicate`` and ``Not`` and pydantic's strict integers,
which no schema keyword can say, are checks of their own. Any other rule on
the value from either library is refused by name when the tool is built, never
ignored; what only annotates a schema or shapes output is left aside.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from retinue._jsonschema import is_number
from retinue._lossless import shown_short
from retinue._naming import code_name

from ._hints import is_type_alias

__all__ = [
    "SIZE_KEYWORDS",
    "checking",
    "json_kinds",
    "metadata_keywords",
    "refuse_field_default",
    "refuse_foreign_aliases",
    "with_keywords",
]

_BOUNDS = {
    "gt": "exclusiveMinimum",
    "ge": "minimum",
    "lt": "exclusiveMaximum",
    "le": "maximum",
    "multiple_of": "multipleOf",
}
# (least, most) size keyword per JSON type a length bounds.
SIZE_KEYWORDS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}


def metadata_keywords(
    metadata: list[object], schema: dict[str, object], where: str
) -> dict[str, object]:
    """The schema keywords *metadata* asks of a value described by *schema*.

    A str in *metadata* is the description (the first one), before any a
    ``Field(description=...)`` gives.

    Raises:
        TypeError: a numeric bound on a type with no number, a length bound
            on a type with no length, or a pattern on a type with no string.
    """
    keywords: dict[str, object] = {}
    also: list[dict[str, object]] = []  # a second pattern or step: both must hold
    for item in _flattened(metadata):
        if isinstance(item, str):
            continue
        _refuse_unread(item, where)
        for keyword, value in _constraints(item, schema, where):
            _merge(keywords, also, keyword, value)
        description = getattr(item, "description", None)
        if isinstance(description, str) and description:
            keywords["description"] = description
    text = next((item for item in metadata if isinstance(item, str) and item), None)
    if text is not None:
        keywords["description"] = text
    if also:
        keywords["allOf"] = also
    return keywords


def with_keywords(schema: dict[str, object], keywords: dict[str, object]) -> dict[str, object]:
    """*schema* with the *keywords* of metadata around it, the bounds it has kept too.

    A ``NewType`` or an alias may be ``Annotated`` itself: its own bound holds
    beside one written around it, the tighter one kept, a second pattern or step
    in ``allOf``; the outer description is the one shown.
    """
    merged = dict(schema)
    also: list[dict[str, object]] = []
    for keyword, value in keywords.items():
        if keyword == "allOf":
            also.extend(typing.cast("list[dict[str, object]]", value))
        elif keyword == "description":
            merged[keyword] = value
        else:
            _merge(merged, also, keyword, value)
    if also:
        merged["allOf"] = [*typing.cast("list[object]", merged.get("allOf", [])), *also]
    return merged


# The items of annotated-types and pydantic read here, by class name, each with
# the settings it may carry only unset: what those ask (a conversion, another
# name for the argument, a default) is done by nothing here. The others say
# nothing of an argument's value: JSON holds no infinity or NaN (AllowInfNan),
# a call reports one problem anyway (FailFast), serializers shape output, and
# the rest only annotate a schema or pick a union member the schema picks too.
_READ: dict[str, tuple[str, ...]] = {
    "Gt": (), "Ge": (), "Lt": (), "Le": (), "Interval": (), "MultipleOf": (), "MinLen": (),
    "MaxLen": (), "Len": (), "Predicate": (), "Not": (), "Strict": (), "DocInfo": (),
    "Unit": (), "AllowInfNan": (), "FailFast": (), "PlainSerializer": (),
    "WrapSerializer": (), "SkipJsonSchema": (), "Examples": (), "Tag": (),
    "FieldInfo": ("alias", "validation_alias", "validate_default"),
    "StringConstraints": ("strip_whitespace", "to_upper", "to_lower", "ascii_only"),
}  # fmt: skip
# Field(...) keeps the keywords it has no class for in one bag. Of those, pattern is read,
# and union_mode picks a member, as pydantic's default (smart) does here: one of the value's
# own JSON type first, else the first member whose schema takes the value.
_BAG = "_PydanticGeneralMetadata"
_BAG_READ = frozenset({"pattern", "union_mode"})
_LIBRARIES = frozenset({"annotated_types", "pydantic"})
_ENFORCED = (
    "is not enforced on tool arguments, which are checked only against bounds, multiple_of, "
    "lengths, pattern, strict integers and annotated-types' Predicate and Not: "
    "check it in the tool's body"
)


def _refuse_unread(item: object, where: str) -> None:
    """Refuse an item of annotated-types or pydantic that asks what no check here does."""
    cls = type(item)
    if cls.__module__.partition(".")[0] not in _LIBRARIES:
        return  # another library's marker says nothing of the value
    name = cls.__name__
    if name == _BAG:
        unread = [key for key, value in vars(item).items() if key not in _BAG_READ and value]
    elif name in _READ:
        unread = [key for key in _READ[name] if getattr(item, key, None) not in (None, False)]
    else:
        raise TypeError(f"{where}: {item!r} {_ENFORCED}")
    if name == "FieldInfo" and _has_default(item):
        raise TypeError(
            f"{where}: a default in Field(...) inside Annotated is not read: give it in "
            "the signature, as in x: Annotated[int, Field(ge=1)] = 3"
        )
    if unread:
        # pydantic's Field(...) builds both a FieldInfo and the bag: the user wrote Field.
        owner = "Field" if name in ("FieldInfo", _BAG) else name
        setting = f"{owner}({unread[0]}={getattr(item, unread[0])!r})"
        raise TypeError(f"{where}: {setting} {_ENFORCED}")


def _has_default(field: object) -> bool:
    """Whether a pydantic ``FieldInfo`` carries a default or a default factory."""
    is_required = getattr(field, "is_required", None)
    return callable(is_required) and not is_required()


def checking(
    coerce: Callable[[object], object],
    metadata: list[object],
    schema: dict[str, object],
    where: str,
) -> Callable[[object], object]:
    """*coerce* with the checks of *metadata* that no schema keyword can say.

    A strict integer (pydantic's ``Strict``) refuses JSON's ``2.0`` before it
    is read as ``2``; annotated-types' ``Predicate`` and ``Not`` then run on
    the value the body gets, in *metadata*'s order. Each raises ``ValueError``
    naming what the value failed and the value.

    Raises:
        TypeError: a ``Predicate`` or ``Not`` of something that is not callable.
    """
    strict = False
    checks: list[Callable[[object], None]] = []
    for item in _flattened(metadata):
        cls = type(item)
        if cls.__name__ == "Strict":
            strict = strict or getattr(item, "strict", False) is True
        elif cls.__module__ == "annotated_types" and cls.__name__ in ("Predicate", "Not"):
            func = getattr(item, "func", None)
            if not callable(func):
                raise TypeError(f"{where}: {cls.__name__} needs a function, got {func!r}")
            checks.append(_predicate_check(func, holds=cls.__name__ == "Predicate"))
    # The one strict reading JSON's own types do not give already: a string, a
    # boolean and a number are taken as they are, an integer's 2.0 is read as 2.
    kinds = _kinds(schema)
    strict_int = strict and "integer" in kinds and "number" not in kinds
    if not checks and not strict_int:
        return coerce

    def checked(value: object) -> object:
        if strict_int and type(value) is float:
            raise ValueError(f"must be an integer (strict), got {shown_short(value)}")
        converted = coerce(value)
        for check in checks:
            check(converted)
        return converted

    return checked


def _predicate_check(func: Callable[[Any], object], *, holds: bool) -> Callable[[object], None]:
    """A check that *func* of the value is true (*holds*) or false, else ``ValueError``."""
    name = code_name(func)
    wanted = "must satisfy" if holds else "must not satisfy"

    def check(value: object) -> None:
        if bool(func(value)) is not holds:
            raise ValueError(f"{wanted} {name}, got {shown_short(value)}")

    return check


def _constraints(
    item: object, schema: dict[str, object], where: str
) -> Iterator[tuple[str, object]]:
    """The schema keywords one metadata item carries."""
    for name, keyword in _BOUNDS.items():
        value = getattr(item, name, None)
        if value is not None:
            _check_numeric(schema, name, where)
            yield keyword, value
    for index, name in enumerate(("min_length", "max_length")):
        value = getattr(item, name, None)
        if value is not None:
            # Each size keyword bounds its own JSON type only: one per sized type allowed.
            yield from ((keywords[index], value) for keywords in _size_keywords(schema, where))
    pattern = item if isinstance(item, re.Pattern) else getattr(item, "pattern", None)
    if isinstance(pattern, re.Pattern | str):
        _check_text(schema, where)
        yield "pattern", _with_flags(pattern) if isinstance(pattern, re.Pattern) else pattern


def _with_flags(pattern: re.Pattern[str]) -> str:
    """A compiled pattern's text, its flags written inline so the text means the same."""
    letters = "".join(letter for flag, letter in _FLAG_LETTERS if pattern.flags & flag)
    return f"(?{letters}){pattern.pattern}" if letters else pattern.pattern


# ASCII too: without it ``\w`` and ``\d`` would take the non-ASCII letters and digits it refuses.
_FLAG_LETTERS = (
    (re.IGNORECASE, "i"),
    (re.MULTILINE, "m"),
    (re.DOTALL, "s"),
    (re.VERBOSE, "x"),
    (re.ASCII, "a"),
)
# Repeated, the tighter bound wins: both hold exactly when it does.
_TIGHTEST: dict[str, Callable[[Any, Any], object]] = {
    "minimum": max, "exclusiveMinimum": max, "minLength": max, "minItems": max,
    "minProperties": max, "maximum": min, "exclusiveMaximum": min, "maxLength": min,
    "maxItems": min, "maxProperties": min,
}  # fmt: skip


def _merge(
    keywords: dict[str, object], also: list[dict[str, object]], keyword: str, value: object
) -> None:
    """Add *keyword*; repeated, keep what makes every occurrence hold."""
    known = keywords.get(keyword)
    if keyword not in keywords or known == value:
        keywords[keyword] = value
    elif keyword in _TIGHTEST and is_number(known) and is_number(value):
        keywords[keyword] = _TIGHTEST[keyword](known, value)
    else:
        also.append({keyword: value})


def _flattened(metadata: list[object]) -> Iterator[object]:
    """*metadata*, a pydantic ``FieldInfo`` followed by the constraints it holds.

    An ``Annotated`` alias given as an item stands for the items it holds:
    annotated-types' ``LowerCase`` is one (``Annotated[T, Predicate(str.islower)]``),
    and ``Annotated[str, LowerCase]`` is written where ``LowerCase[str]`` was meant. So does
    a ``TypeAliasType`` of one.
    """
    for given in metadata:
        item = _alias_value(given)
        if typing.get_origin(item) is typing.Annotated:
            yield from _flattened(list(typing.get_args(item)[1:]))
            continue
        yield item
        inner = getattr(item, "metadata", None)
        if isinstance(inner, list):
            yield from _flattened(inner)


def _alias_value(item: object) -> object:
    """*item*, or the value of the ``TypeAliasType`` it is (of the one that is, and so on)."""
    while is_type_alias(item):
        item = typing.cast("Any", item).__value__
    return item


def refuse_foreign_aliases(hint: object, metadata: list[object], where: str) -> None:
    """Refuse an ``Annotated`` alias in *metadata* whose own type is not *hint*'s.

    ``Annotated[int, LowerCase]`` would run ``str.islower`` on an int and fail every call.

    Raises:
        TypeError: such an alias, naming both types.
    """
    for given in metadata:
        item = _alias_value(given)
        if typing.get_origin(item) is not typing.Annotated:
            continue
        base, *inner = typing.get_args(item)
        if not _fits(hint, base, numbers_meet=not _holds_predicate(inner)):
            raise TypeError(
                f"{where}: an Annotated alias given as metadata holds rules of "
                f"{_type_text(base)}, not of {_type_text(hint)}, the type it annotates: every "
                "call would fail them"
            )
        refuse_foreign_aliases(hint, inner, where)


def _holds_predicate(metadata: list[object]) -> bool:
    """Whether *metadata* holds an annotated-types ``Predicate`` or ``Not``: a method of one
    number type (``float.is_integer``) fails on another, where a bound takes them all."""
    return any(
        type(item).__module__ == "annotated_types" and type(item).__name__ in ("Predicate", "Not")
        for item in _flattened(metadata)
    )


def _fits(hint: object, base: object, *, numbers_meet: bool) -> bool:
    """Whether a value of *hint* may be one of *base*; true where that cannot be told, so only
    types no value can be both of are refused. With *numbers_meet*, any two number types
    may be (an int stands for a float, and a bound fits either)."""
    hint, base = _supertype(hint), _supertype(base)
    if hint is base or any(side is Any or side is object for side in (hint, base)):
        return True
    if isinstance(base, TypeVar):
        bounds = base.__constraints__ or (() if base.__bound__ is None else (base.__bound__,))
        return not bounds or any(_fits(hint, bound, numbers_meet=numbers_meet) for bound in bounds)
    for side, members in ((base, typing.get_args(base)), (hint, typing.get_args(hint))):
        origin = typing.get_origin(side)
        if origin is typing.Union or origin is types.UnionType:
            # One member of the hint that may be one of the base's is enough: a null let by
            # is no rule's to judge.
            return any(
                _fits(m, base, numbers_meet=numbers_meet)
                if side is hint
                else _fits(hint, m, numbers_meet=numbers_meet)
                for m in members
            )
    if typing.get_origin(hint) is typing.Literal:
        return all(
            _fits(type(value), base, numbers_meet=numbers_meet) for value in typing.get_args(hint)
        )
    kind, base_kind = typing.get_origin(hint) or hint, typing.get_origin(base) or base
    if not isinstance(kind, type) or not isinstance(base_kind, type):
        return True
    if numbers_meet and issubclass(kind, _NUMBERS) and issubclass(base_kind, _NUMBERS):
        return True
    try:
        # Either way round: a value of the narrower type is one of both.
        return issubclass(kind, base_kind) or issubclass(base_kind, kind)
    except TypeError:  # a protocol of no runtime check
        return True


_NUMBERS = (int, float, complex)


def _supertype(hint: object) -> object:
    """*hint* past the ``Annotated``, ``NewType`` and ``TypeAliasType`` layers it is in."""
    while True:
        hint = _alias_value(hint)
        if isinstance(hint, typing.NewType):
            hint = hint.__supertype__
        elif typing.get_origin(hint) is typing.Annotated:
            hint = typing.get_args(hint)[0]
        else:
            return hint


def _type_text(hint: object) -> str:
    """*hint* as written: ``str``; a type variable as the types it stands for."""
    hint = _supertype(hint)
    if isinstance(hint, TypeVar):
        bounds = hint.__constraints__ or (hint.__bound__,)
        return " or ".join(_type_text(bound) for bound in bounds)
    name = getattr(hint, "__name__", None)
    return name if isinstance(name, str) and typing.get_origin(hint) is None else repr(hint)


def _check_numeric(schema: dict[str, object], name: str, where: str) -> None:
    """Refuse a numeric bound on a type with no number: it would constrain nothing."""
    if not {"integer", "number"} & set(_kinds(schema)):
        raise TypeError(
            f"{where}: a numeric bound ({name}) needs an int or float type, "
            f"not {schema.get('type') or 'this one'}"
        )


def _check_text(schema: dict[str, object], where: str) -> None:
    """Refuse a pattern on a type with no string: JSON Schema applies it to strings only."""
    if "string" not in _kinds(schema):
        raise TypeError(
            f"{where}: a pattern needs a str type, not {schema.get('type') or 'this one'}"
        )


def json_kinds(schema: object) -> frozenset[str]:
    """The JSON type names *schema* allows, its ``anyOf`` members' included."""
    return frozenset(str(kind) for kind in _kinds(schema))


def _kinds(schema: object) -> list[object]:
    """The JSON types *schema* allows, its ``anyOf`` members' included."""
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    if kind is None and "$ref" in schema:
        kind = "object"  # the reference to a record described once under $defs
    kinds = [kind] if isinstance(kind, str) else list(kind) if isinstance(kind, list) else []
    members = schema.get("anyOf")
    for member in members if isinstance(members, list) else ():
        kinds.extend(_kinds(member))
    return kinds


def _size_keywords(schema: dict[str, object], where: str) -> list[tuple[str, str]]:
    """The (least, most) size keywords of each sized JSON type *schema* allows."""
    sized = [
        SIZE_KEYWORDS[str(kind)] for kind in dict.fromkeys(_kinds(schema)) if kind in SIZE_KEYWORDS
    ]
    if not sized:
        raise TypeError(
            f"{where}: a length bound (min_length, max_length) needs a str, list or dict "
            f"type, not {schema.get('type') or 'this one'}"
        )
    return sized


def refuse_field_default(default: object, where: str) -> None:
    """Refuse a pydantic ``Field(...)`` given as a default: the body would receive it.

    Raises:
        TypeError: *default* is a pydantic ``FieldInfo``.
    """
    kind = type(default)
    if kind.__name__ == "FieldInfo" and kind.__module__.startswith("pydantic"):
        raise TypeError(
            f"{where}: a pydantic Field(...) as the default is not read (the body would get "
            "it as its value): write Annotated[T, Field(...)] and give a plain default"
        )
