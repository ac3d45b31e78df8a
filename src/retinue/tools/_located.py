"""A type's shape (its schema and conversion), the conversion of a container's parts, and
where a conversion of validated JSON failed: the path to the part that refused it."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import NoReturn

import attrs

from retinue._errors import RetinueError, ToolError, describe_failure, failure_of
from retinue._lossless import MAX_JSON_DEPTH

from ._judgements import Run
from ._paths import key_step

__all__ = [
    "Coerce",
    "NestedTooDeeplyError",
    "Shape",
    "constructor_failure",
    "converted_fields",
    "converted_items",
    "converted_keys",
    "items_of",
    "keeping_refusals",
    "member_check",
    "note_refused",
    "pairs_of",
    "placed_at",
    "raise_at",
    "refused_before",
]

Coerce = Callable[[object], object]


def _identity(value: object) -> object:
    return value


@attrs.frozen
class Shape:
    """A type's JSON schema and the function turning validated JSON into that type."""

    schema: dict[str, object]
    coerce: Coerce = _identity


class _ArgumentError(RetinueError, ValueError):
    """A valid argument its parameter's type still refused: where (``points[2].x``) and why.

    Its message is what the model sees, after the tool's name.
    """

    def __init__(self, path: str, cause: Exception) -> None:
        super().__init__(path)
        self.path = path
        self.cause = cause

    def __str__(self) -> str:
        path = self.path
        if isinstance(self.cause, NestedTooDeeplyError) and len(path) > _DEEP_PATH_SHOWN:
            # A path past the depth limit runs to kilobytes: its start says where.
            path = path[:_DEEP_PATH_SHOWN] + "..."
        return f"{path}: {describe_failure(self.cause)}"


class NestedTooDeeplyError(ValueError):
    """A value nested too deeply to convert: past :data:`MAX_JSON_DEPTH` levels, or past the
    records of a recursive schema a conversion may be inside."""

    def __init__(self, limit: str = f"more than {MAX_JSON_DEPTH} levels") -> None:
        super().__init__(f"nested too deeply: {limit}")


# How much of the path to a part nested too deeply a refusal shows, as freeze_json does.
_DEEP_PATH_SHOWN = 60


def constructor_failure(cls: type[object], exc: BaseException) -> Exception:
    """What *cls*'s constructor raising *exc* refuses the fields with, which the caller places
    at the record: an ``Exception`` as it is (a validator's ``ValueError``), a ``SystemExit`` or
    a ``BaseException`` of the user's as a ``ToolError`` naming the class.

    Raises:
        BaseException: Ctrl-C or a real cancel, as they are.
    """
    return failure_of(exc, cls.__qualname__, ToolError)


def raise_at(segment: str, exc: Exception) -> NoReturn:
    """Raise *exc*, a part's refusal, placed at *segment* before the path it already has.

    A container converts each part once and places its refusal as it passes up:
    converting the parts again to find the one that refused would double the work
    at each level of the value.
    """
    placed = placed_at(segment, exc)
    if isinstance(exc, RecursionError):
        raise placed from None
    raise placed from placed.cause


def placed_at(segment: str, exc: Exception) -> _ArgumentError:
    """*exc*, a part's refusal, as :func:`raise_at` raises it."""
    if isinstance(exc, _ArgumentError):
        return _ArgumentError(segment + exc.path, exc.cause)
    if isinstance(exc, RecursionError):
        # Python's stack ran out before the records' limit did: the hooks wrapping the
        # call (tools/execute middlewares) take their share of it. Refused as too deep,
        # its path cut short, not as a RecursionError with a path of kilobytes.
        return _ArgumentError(segment, NestedTooDeeplyError(_STACK_SPENT))
    return _ArgumentError(segment, exc)


_STACK_SPENT = "deeper than the stack left to this call holds"


class _Conversion:
    """What one call's conversion keeps while it runs, for the unions inside."""

    __slots__ = ("check", "refused")

    def __init__(self) -> None:
        # (id(value), id(shape)) -> (refusal, value): the value held, so its id is not reused.
        self.refused: dict[tuple[int, int], tuple[Exception, object]] = {}
        # The check judging by value whether union members take the parts.
        self.check: Run | None = None


_CONVERSION: contextvars.ContextVar[_Conversion | None] = contextvars.ContextVar(
    "_CONVERSION", default=None
)


def keeping_refusals(convert: Coerce, value: object) -> object:
    """*convert* of *value*, the refusals and judgements of the unions inside kept while it runs.

    Opened by the outermost union of a conversion: a tool with no union pays
    nothing for it, where each call setting the context would.
    """
    if _CONVERSION.get() is not None:
        return convert(value)
    token = _CONVERSION.set(_Conversion())
    try:
        return convert(value)
    finally:
        _CONVERSION.reset(token)


def member_check(root: Mapping[str, object]) -> Run:
    """The check a union of this conversion asks whether a member takes a part: one for
    the whole conversion, so that a part already judged is read, not judged again."""
    conversion = _CONVERSION.get()
    check = None if conversion is None else conversion.check
    if check is None or check.root is not root:
        # The schema's unions share one root (its $defs); one without any has no recursion.
        check = Run(root, by_path=False)
        if conversion is not None:
            conversion.check = check
    return check


def refused_before(value: object, shape: Shape) -> Exception | None:
    """The refusal *shape* already gave *value* in this conversion, if it did."""
    conversion = _CONVERSION.get()
    known = None if conversion is None else conversion.refused.get((id(value), id(shape)))
    return None if known is None else known[0]


def note_refused(value: object, shape: Shape, exc: Exception) -> None:
    """Keep *shape*'s refusal of *value*: a union around it tries it once, not once per
    member of each union around that (two members taking one tree each level doubled it).
    The entry holds *value*, so that its id is not reused while the conversion runs."""
    conversion = _CONVERSION.get()
    if conversion is not None:
        conversion.refused[id(value), id(shape)] = (exc, value)


def converted_items(convert: Coerce, items: list[object]) -> list[object]:
    """Each item converted, a refusal placed at its index (``[2]``)."""
    converted: list[object] = []
    for index, item in enumerate(items):  # a loop, not a comprehension: a frame fewer a level
        try:
            converted.append(convert(item))
        except Exception as exc:
            raise_at(f"[{index}]", exc)
    return converted


def items_of(value: object) -> list[object]:
    """A JSON array's items; any other value as the one item."""
    return list(value) if isinstance(value, list | tuple) else [value]


def converted_keys(convert: Coerce, pairs: list[tuple[str, object]]) -> list[object]:
    """Each key converted, a refusal placed at its name (``.x``, ``["x.y"]``)."""
    converted: list[object] = []
    for name, _ in pairs:
        try:
            converted.append(convert(name))
        except Exception as exc:
            raise_at(key_step(name), exc)
    return converted


def pairs_of(value: object) -> list[tuple[str, object]]:
    """A JSON object's (name, value) pairs; none of any other value."""
    return [(str(k), x) for k, x in value.items()] if isinstance(value, Mapping) else []


def converted_fields(
    shapes: Mapping[str, Shape], pairs: list[tuple[str, object]], *, keep_others: bool
) -> dict[str, object]:
    """Each field converted by its shape, a refusal placed at its name (``.x``, ``["x.y"]``); another
    key kept as it is when *keep_others*, else left out."""
    converted: dict[str, object] = {}
    for name, item in pairs:
        shape = shapes.get(name)
        if shape is None:
            if keep_others:
                converted[name] = item
            continue
        try:
            converted[name] = shape.coerce(item)
        except Exception as exc:
            raise_at(key_step(name), exc)
    return converted
