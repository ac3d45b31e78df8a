"""Schema keywords and checks from ``Annotated`` metadata: annotated-types and pydantic's ``Field``.

``Annotated[int, Field(ge=1, le=7, description="...")]`` and
``Annotated[str, MinLen(2), re.compile("^[a-z]+$")]`` say what an argument
may be; read by the attributes they carry (``gt``, ``ge``, ``lt``, ``le``,
``multiple_of``, ``min_length``, ``max_length``, ``pattern``,
``description``), not by their classes, so neither library is imported.
A pydantic ``FieldInfo`` holds its constraints in its ``metadata`` list.
annotated-types' ``Predicate`` and ``Not``, which no schema keyword can say,
are checks run on the converted value. Any other item of either library is
refused by name: a rule on the value is enforced on every call or refused
when the tool is built, never ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from retinue._jsonschema import is_number

__all__ = ["checking", "metadata_keywords"]

_BOUNDS = {
    "gt": "exclusiveMinimum",
    "ge": "minimum",
    "lt": "exclusiveMaximum",
    "le": "maximum",
    "multiple_of": "multipleOf",
}
# (least, most) size keyword per JSON type a length bounds.
_SIZES = {
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
        TypeError: a numeric bound on a type with no number, or a length bound
            on a type with no length.
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


# The items of annotated-types and pydantic read here, by class name, each with
# the settings it may carry only unset: what those ask (a conversion, a stricter
# parse, another name for the argument) is done by nothing here. JSON holds no
# infinity or NaN (AllowInfNan), and a call reports one problem anyway (FailFast).
_READ: dict[str, tuple[str, ...]] = {
    "Gt": (), "Ge": (), "Lt": (), "Le": (), "Interval": (), "MultipleOf": (), "MinLen": (),
    "MaxLen": (), "Len": (), "Predicate": (), "Not": (), "DocInfo": (), "AllowInfNan": (),
    "FailFast": (), "Strict": ("strict",), "FieldInfo": ("alias", "validation_alias"),
    "StringConstraints": ("strip_whitespace", "to_upper", "to_lower", "strict", "ascii_only"),
}  # fmt: skip
# Field(...) keeps the keywords it has no class for in one bag; of those only pattern is read.
_BAG = "_PydanticGeneralMetadata"
_LIBRARIES = frozenset({"annotated_types", "pydantic"})
_ENFORCED = (
    "is not enforced on tool arguments, which are checked only against bounds, multiple_of, "
    "lengths, pattern and annotated-types' Predicate and Not: check it in the tool's body"
)


def _refuse_unread(item: object, where: str) -> None:
    """Refuse an item of annotated-types or pydantic that asks what no check here does."""
    cls = type(item)
    if cls.__module__.partition(".")[0] not in _LIBRARIES:
        return  # another library's marker says nothing of the value
    name = cls.__name__
    if name == _BAG:
        unread = [key for key in vars(item) if key != "pattern"]
    elif name in _READ:
        unread = [key for key in _READ[name] if getattr(item, key, None) not in (None, False)]
    else:
        raise TypeError(f"{where}: {item!r} {_ENFORCED}")
    if unread:
        # pydantic's Field(...) builds both a FieldInfo and the bag: the user wrote Field.
        owner = "Field" if name in ("FieldInfo", _BAG) else name
        setting = f"{owner}({unread[0]}={getattr(item, unread[0])!r})"
        raise TypeError(f"{where}: {setting} {_ENFORCED}")


def checking(
    coerce: Callable[[object], object], metadata: list[object]
) -> Callable[[object], object]:
    """*coerce*, then annotated-types' ``Predicate`` and ``Not`` of *metadata* on what it made.

    The checks see the value the body gets, in *metadata*'s order; each raises
    ``ValueError`` naming the function and the value when the value does not hold.
    """
    checks: list[Callable[[object], None]] = []
    for item in _flattened(metadata):
        cls = type(item)
        func = getattr(item, "func", None)
        if cls.__module__ == "annotated_types" and cls.__name__ in ("Predicate", "Not"):
            assert callable(func)
            checks.append(_predicate_check(func, holds=cls.__name__ == "Predicate"))
    if not checks:
        return coerce

    def checked(value: object) -> object:
        converted = coerce(value)
        for check in checks:
            check(converted)
        return converted

    return checked


def _predicate_check(func: Callable[[Any], object], *, holds: bool) -> Callable[[object], None]:
    name = getattr(func, "__qualname__", None) or repr(func)
    wanted = "must satisfy" if holds else "must not satisfy"

    def check(value: object) -> None:
        if bool(func(value)) is not holds:
            shown = repr(value)
            shown = f"{shown[:60]}..." if len(shown) > 64 else shown
            raise ValueError(f"{wanted} {name}, got {shown}")

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
    if isinstance(pattern, re.Pattern):
        yield "pattern", _with_flags(pattern)
    elif isinstance(pattern, str):
        yield "pattern", pattern


def _with_flags(pattern: re.Pattern[str]) -> str:
    """A compiled pattern's text, its flags written inline so the text means the same."""
    letters = "".join(letter for flag, letter in _FLAG_LETTERS if pattern.flags & flag)
    return f"(?{letters}){pattern.pattern}" if letters else pattern.pattern


_FLAG_LETTERS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))
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
    """*metadata*, a pydantic ``FieldInfo`` followed by the constraints it holds."""
    for item in metadata:
        yield item
        inner = getattr(item, "metadata", None)
        if isinstance(inner, list):
            yield from _flattened(inner)


def _check_numeric(schema: dict[str, object], name: str, where: str) -> None:
    """Refuse a numeric bound on a type with no number: it would constrain nothing."""
    if not {"integer", "number"} & set(_kinds(schema)):
        raise TypeError(
            f"{where}: a numeric bound ({name}) needs an int or float type, "
            f"not {schema.get('type') or 'this one'}"
        )


def _kinds(schema: object) -> list[object]:
    """The JSON types *schema* allows, its ``anyOf`` members' included."""
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else list(kind) if isinstance(kind, list) else []
    members = schema.get("anyOf")
    for member in members if isinstance(members, list) else ():
        kinds.extend(_kinds(member))
    return kinds


def _size_keywords(schema: dict[str, object], where: str) -> list[tuple[str, str]]:
    """The (least, most) size keywords of each sized JSON type *schema* allows."""
    sized = [_SIZES[str(kind)] for kind in dict.fromkeys(_kinds(schema)) if kind in _SIZES]
    if not sized:
        raise TypeError(
            f"{where}: a length bound (min_length, max_length) needs a str, list or dict "
            f"type, not {schema.get('type') or 'this one'}"
        )
    return sized
