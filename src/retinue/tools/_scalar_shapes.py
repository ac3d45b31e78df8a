"""JSON schemas of scalar hints: the JSON primitives, ``Literal`` choices, enums and flags."""

from __future__ import annotations

import enum
import typing

from ._located import Shape

__all__ = ["PRIMITIVES", "enum_shape", "literal_shape", "primitive_shape"]

PRIMITIVES: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
"""The Python types of JSON's scalars, and their JSON type names."""


def primitive_shape(hint: object) -> Shape:
    name = PRIMITIVES[hint]
    if hint is int:
        return Shape({"type": name}, lambda v: int(v) if isinstance(v, float) else v)
    if hint is float:
        return Shape(
            {"type": name},
            lambda v: float(v) if isinstance(v, int) and not isinstance(v, bool) else v,
        )
    return Shape({"type": name})


def _json_types(values: typing.Sequence[object]) -> str | list[str]:
    names: list[str] = []
    for value in values:
        name = PRIMITIVES.get(type(value), "null" if value is None else "?")
        if name not in names:
            names.append(name)
    if "integer" in names and "number" in names:
        names.remove("integer")
    return names[0] if len(names) == 1 else names


def _check_literals(values: typing.Sequence[object], where: str, hint: str) -> None:
    if not values:
        # Its schema would be an enum no value is in, of no type, which providers refuse.
        raise TypeError(f"{where}: {hint} has no values, so no argument could be one")
    for value in values:
        if value is not None and type(value) not in PRIMITIVES:
            raise TypeError(f"{where}: enum value {value!r} is not a JSON scalar")


def literal_shape(args: tuple[object, ...], where: str) -> Shape:
    values = [a.value if isinstance(a, enum.Enum) else a for a in args]
    _check_literals(values, where, "Literal[()]")
    choices: dict[tuple[bool, object], object] = {}
    for value, arg in zip(values, args, strict=True):
        # Choices JSON cannot tell apart are one value of the enum: the first declared.
        choices.setdefault(_choice_key(value), arg)
    values = [value for _, value in choices]

    def coerce(value: object) -> object:
        # The body gets the declared choice: the enum member for Literal[Color.RED, ...], as
        # for a plain enum hint, and the int 1 for JSON's 1.0, as for an int hint.
        return choices.get(_choice_key(value), value)

    return Shape({"type": _json_types(values), "enum": values}, coerce)


def _choice_key(value: object) -> tuple[bool, object]:
    """Equal keys for JSON-equal scalars (``1`` and ``1.0``), never for ``True`` and ``1``."""
    return (type(value) is bool, value)


def enum_shape(cls: type[enum.Enum], where: str) -> Shape:
    if issubclass(cls, enum.Flag) and all(
        type(member.value) is int for member in cls.__members__.values()
    ):
        return _flag(cls, where)
    values = [member.value for member in cls]
    _check_literals(values, where, f"enum {cls.__qualname__}")
    return Shape({"type": _json_types(values), "enum": values}, cls)


def _flag(cls: type[enum.Flag], where: str) -> Shape:
    """A ``Flag``: any combination of its members, the integer of their bits (``0``: none).

    Its members alone as an ``enum`` would refuse ``READ | WRITE``, the value a flag is for.
    Every declared member counts, an alias or one of several bits too, which iterating
    the class leaves out.
    """
    members = list(cls.__members__.values())
    if not members:
        _check_literals([], where, f"enum {cls.__qualname__}")
    mask = 0
    for member in members:
        # A negative value (Python's old ``ALL = -1`` alias) is no bits of its own.
        if (bits := int(member.value)) >= 0:
            mask |= bits

    def coerce(value: object) -> object:
        bits = int(value) if isinstance(value, int | float) else -1
        if bits < 0 or bits & ~mask:
            raise ValueError(
                f"must combine only the bits of {cls.__qualname__} ({mask}), got {bits}"
            )
        return cls(bits)

    return Shape({"type": "integer", "minimum": 0, "maximum": mask}, coerce)
