"""Field checks and defaults shared by the session event classes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from retinue._content import USER_SOURCE, ContentBlock, MessageSource, as_content, wrong_type
from retinue._errors import InvalidJsonError
from retinue._lossless import SMALL_INT, JsonValue, check_digits, freeze_json, shown
from retinue._request import ToolSchema
from retinue._stream import count_validator

__all__ = [
    "BOUND",
    "NEG_BOUND",
    "as_tuple",
    "bound_set_attribute",
    "check_long",
    "content_field",
    "count",
    "empty_is_none",
    "exactly",
    "frozen_json",
    "integer",
    "lines",
    "not_integers",
    "optional_integer",
    "outside",
    "schemas",
    "set_attribute",
    "source_field",
    "wrong_type",
]


def content_field() -> tuple[ContentBlock, ...]:
    return attrs.field(converter=as_content)


def source_field() -> MessageSource:
    return attrs.field(default=USER_SOURCE, validator=exactly(MessageSource))


def frozen_json(value: object) -> JsonValue:
    return freeze_json(value)


# The checks below keep every logged value its JSON type: a bool or float
# where an integer belongs would encode as ``true``/``1.0`` (or ``True``) and
# then not reload, and an integer with more digits than
# ``sys.get_int_max_str_digits()`` would not encode at all. Exact type checks,
# because ``bool`` is an ``int``; the digit check runs only past BOUND.


def integer(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not int:
        raise InvalidJsonError(f"{attribute.name} must be an integer, got {value!r}")
    if not NEG_BOUND <= value <= BOUND:
        check_digits(value, attribute.name)


def optional_integer(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        integer(instance, attribute, value)


count = count_validator()


def not_integers(kind: str, turn: object, step: object) -> InvalidJsonError:
    return InvalidJsonError(
        f"{kind}: turn and step must be integers, got {shown(turn)}, {shown(step)}"
    )


def check_long(kind: str, turn: int, step: int) -> None:
    """Refuse a turn or step too long for JSON to write (called only past BOUND)."""
    check_digits(turn, f"{kind}: turn")
    check_digits(step, f"{kind}: step")


# The hot constructors test ``NEG_BOUND <= turn <= BOUND >= step >= NEG_BOUND``
# (both in range, in one chain) against one-digit ints, which the interpreter
# compares without a call; a turn or step past them takes the real digit check.
BOUND = SMALL_INT
NEG_BOUND = -SMALL_INT


def exactly(kind: type[Any], *, optional: bool = False) -> Any:
    """An attrs validator: the value is a *kind* (all final: an exact type check), or None."""
    expected = f"a {kind.__name__}" + (" or None" if optional else "")

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not kind and not (optional and value is None):
            raise wrong_type(instance, attribute.name, expected, value)

    return check


def schemas(instance: object, attribute: attrs.Attribute[Any], value: tuple[object, ...]) -> None:
    if not all(type(item) is ToolSchema for item in value):
        raise wrong_type(instance, attribute.name, "a tuple of ToolSchema", value)


# StepStart, StepEnd and ToolCallEvent are built several times a turn: their
# checks sit in a hand-written __init__, which costs a tenth of what an
# __attrs_post_init__ hook adds to attrs' own.
set_attribute = object.__setattr__
bound_set_attribute = object.__setattr__.__get__


def outside(name: str, value: object, allowed: tuple[str, ...]) -> ValueError:
    # Stored as written, a value outside the Literal would not reload.
    return ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def lines(_instance: object, attribute: attrs.Attribute[Any], value: tuple[object, ...]) -> None:
    if not all(type(line) is str for line in value):
        raise InvalidJsonError(f"{attribute.name} must hold only strings, got {value!r}")


def as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


def empty_is_none(value: str | None) -> str | None:
    # The canonical header has no empty system (R8.2): it is stored absent.
    return value or None
