"""A refusal of arguments as they are converted, naming each argument refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from retinue._errors import RetinueError
from retinue._lossless import thaw_json

from ._located import Shape, placed_at, raise_at
from ._paths import first_step
from ._validate import MAX_PROBLEMS

__all__ = ["LEAVES", "converter", "raise_each"]

LEAVES = frozenset({str, int, float, bool, type(None)})
"""The types of the JSON values that thaw to themselves."""


def converter(
    shapes: Mapping[str, Shape], rest: Shape | None = None
) -> Callable[[str, object], object]:
    """What converts an argument by the shape of its name (else *rest*), as a binder does."""

    # Any: a call's values are JsonValue, a caller's own plain ones are not typed as such.
    def convert(name: str, value: Any) -> object:
        shape = shapes.get(name, rest)
        if shape is None:
            return None
        return shape.coerce(value if type(value) in LEAVES else thaw_json(value))

    return convert


class _ArgumentsRefusedError(RetinueError, ValueError):
    """Several arguments' refusals, each at its own path, as the schema's check lists them."""

    def __init__(self, refusals: list[Exception], *, more: bool) -> None:
        listed = "; ".join(str(refusal) for refusal in refusals)
        super().__init__(f"{listed}; and more" if more else listed)
        self.refusals = refusals


def raise_each(
    failed: str,
    exc: Exception,
    arguments: Mapping[str, Any],
    convert: Callable[[str, object], object],
) -> NoReturn:
    """Raise *exc*, the refusal of argument *failed*, with those of the arguments after it.

    Reached only once a conversion has failed: the arguments after *failed* are
    converted (*convert*) only to find what else is wrong, up to
    :data:`MAX_PROBLEMS` refusals in all, so a model fixes them in one call.
    """
    refusals: list[Exception] = []
    after = False
    for name, value in arguments.items():
        if len(refusals) >= MAX_PROBLEMS:
            break
        if not after:
            after = name == failed
            continue
        try:
            convert(name, value)
        except Exception as other:
            refusals.append(placed_at(first_step(str(name)), other))
    if not refusals:
        raise_at(first_step(failed), exc)
    first = placed_at(first_step(failed), exc)
    kept = [first, *refusals][:MAX_PROBLEMS]
    raise _ArgumentsRefusedError(kept, more=len(refusals) >= MAX_PROBLEMS) from first.cause
