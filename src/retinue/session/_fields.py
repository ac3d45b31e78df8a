"""Field checks and defaults shared by the session event classes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set as AbstractSet
from typing import Any

import attrs

from retinue._content import ContentBlock, Message, ToolResultBlock, as_content, whole, wrong_type
from retinue._errors import InvalidJsonError
from retinue._lossless import (
    NEG_SMALL_INT,
    SMALL_INT,
    check_digits,
    is_count,
    shown,
)
from retinue._request import ToolSchema
from retinue._sources import USER_SOURCE, MessageSource

from ._nesting import check_blocks

__all__ = [
    "NEG_SMALL_INT",
    "as_tuple",
    "check_turn",
    "check_turn_and_step",
    "content_field",
    "count",
    "empty_is_none",
    "event_content",
    "exactly",
    "integer",
    "joined_lines",
    "lines",
    "optional_integer",
    "outside",
    "schemas",
    "set_attribute",
    "source_field",
    "storable_prefix",
    "wrong_type",
]


def content_field() -> tuple[ContentBlock, ...]:
    """A tuple of content blocks, none nested too deeply to store.

    The events built every step convert and test their blocks inline in a
    hand-written ``__init__`` instead, sparing the converter's and validator's calls.
    """
    field: tuple[ContentBlock, ...] = attrs.field(
        converter=_CONTENT_CONVERTER, validator=_storable_blocks
    )
    return field


def event_content(kind: str, value: object) -> tuple[ContentBlock, ...]:
    """:func:`as_content`, its error naming the event type: ``prompt/blocked: content[0] ...``."""
    try:
        return as_content(value)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TypeError(f"{kind}: {exc}") from None


def _event_content(value: Any, instance: object) -> Any:
    return event_content(_owner(instance), value)


_CONTENT_CONVERTER = attrs.Converter(_event_content, takes_self=True)


def source_field() -> MessageSource:
    return attrs.field(default=USER_SOURCE, validator=exactly(MessageSource))


def _storable_blocks(
    instance: Any, attribute: attrs.Attribute[Any], value: tuple[Any, ...]
) -> None:
    for block in value:
        if type(block) is ToolResultBlock:
            check_blocks(value, _field_path(instance, attribute))
            return


def storable_prefix(
    instance: object, attribute: attrs.Attribute[Any], value: tuple[Message, ...] | None
) -> None:
    for index, message in enumerate(value or ()):
        for block in message.content:
            if type(block) is ToolResultBlock:
                where = f"{_field_path(instance, attribute)}[{index}].content"
                check_blocks(message.content, where)
                break


def _field_path(instance: object, attribute: attrs.Attribute[Any]) -> str:
    """How an error names a field: ``user/message: content`` in an event, else ``EpochHeader.message_prefix``."""
    tag = getattr(type(instance), "type", None)
    if isinstance(tag, str):
        return f"{tag}: {attribute.name}"
    return f"{type(instance).__name__}.{attribute.name}"


def _owner(instance: object) -> str:
    """How an error names what holds a field: the event type (``prompt/blocked``), else the class."""
    tag = getattr(type(instance), "type", None)
    return tag if isinstance(tag, str) else type(instance).__name__


# The checks below keep every logged value its JSON type: a bool or float
# where an integer belongs would encode as ``true``/``1.0`` (or ``True``) and
# then not reload, and an integer with more digits than
# ``sys.get_int_max_str_digits()`` would not encode at all. Exact type checks,
# because ``bool`` is an ``int``; the digit check runs only past SMALL_INT.


def integer(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not int:
        raise InvalidJsonError(
            f"{_field_path(instance, attribute)} must be an integer, got {shown(value)}"
        )
    if not NEG_SMALL_INT <= value <= SMALL_INT:
        check_digits(value, _field_path(instance, attribute))


def optional_integer(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        integer(instance, attribute, value)


def count(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A non-negative exact int JSON can write (``None`` where that is the default)."""
    if value is None and attribute.default is None:
        return
    if not is_count(value):
        raise InvalidJsonError(
            f"{_field_path(instance, attribute)} must be a non-negative integer JSON can write, "
            f"got {shown(value)}"
        )


# The events that carry a turn and a step are built several times a step. Each
# tests, inline, ``type(turn) is int and type(step) is int and NEG_SMALL_INT <=
# turn <= SMALL_INT >= step >= NEG_SMALL_INT``: one-digit ints, compared without
# a call. Only a turn or step that fails it takes this call, which finds out why.


def check_turn(kind: str, turn: object) -> None:
    """Refuse a turn that is not an int, or too long for JSON to write."""
    if type(turn) is not int:
        raise InvalidJsonError(f"{kind}: turn must be an integer, got {shown(turn)}")
    check_digits(turn, f"{kind}: turn")


def check_turn_and_step(kind: str, turn: object, step: object) -> None:
    """Refuse a turn or step that is not an int, or too long for JSON to write."""
    if type(turn) is not int or type(step) is not int:
        raise InvalidJsonError(
            f"{kind}: turn and step must be integers, got {shown(turn)}, {shown(step)}"
        )
    check_digits(turn, f"{kind}: turn")
    check_digits(step, f"{kind}: step")


def exactly(kind: type[Any], *, optional: bool = False) -> Any:
    """An attrs validator: the value is a *kind* (all final: an exact type check), or None."""
    expected = f"a {kind.__name__}" + (" or None" if optional else "")

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not kind and not (optional and value is None):
            raise wrong_type(instance, attribute.name, expected, value)

    return check


def schemas(instance: object, attribute: attrs.Attribute[Any], value: tuple[object, ...]) -> None:
    if type(value) is not tuple or not all(type(item) is ToolSchema for item in value):
        raise wrong_type(instance, attribute.name, "a tuple of ToolSchema", value)


# StepStart, StepEnd and ToolCallEvent are built several times a turn: their
# checks sit in a hand-written __init__, which costs a tenth of what an
# __attrs_post_init__ hook adds to attrs' own.
set_attribute = object.__setattr__


def outside(name: str, value: object, allowed: tuple[str, ...]) -> ValueError:
    # Stored as written, a value outside the Literal would not reload.
    return ValueError(f"{name} must be one of {', '.join(allowed)}; got {shown(value)}")


def lines(instance: object, attribute: attrs.Attribute[Any], value: tuple[object, ...]) -> None:
    if type(value) is not tuple:
        # Left by joined_lines: a str would be split into one-character lines or names.
        raise wrong_type(instance, attribute.name, "a list or tuple of strings", value)
    if not all(type(line) is str for line in value):
        raise InvalidJsonError(
            f"{_field_path(instance, attribute)} must hold only strings, got {shown(value)}"
        )


# Iterable, but no items in an order: one str is one line or name, not its characters.
_NOT_IN_ORDER = (str, bytes, bytearray, memoryview, Mapping, AbstractSet)


def _in_order(value: object) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, _NOT_IN_ORDER)


def as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    """*value* as a tuple; anything but items in an order is kept for the validator to refuse."""
    return tuple(value) if _in_order(value) else value  # type: ignore[return-value]


def joined_lines(value: Iterable[Any]) -> tuple[Any, ...]:
    """*value* as a tuple, each str's surrogate pairs joined (R1.6).

    Anything else, a str among them, is kept for ``lines`` to refuse.
    """
    if not _in_order(value):
        return value  # type: ignore[return-value]
    return tuple([whole(line) for line in value])


def empty_is_none(value: str | None) -> str | None:
    # The canonical header has no empty system (R8.2): it is stored absent. A pair
    # is joined as a block's text is (R1.6); anything but a str, a falsy one too
    # (0, b"", []), is left to refuse.
    joined = whole(value)
    return None if isinstance(joined, str) and not joined else joined  # type: ignore[return-value]
