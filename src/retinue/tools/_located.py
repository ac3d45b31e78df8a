"""A type's shape (its schema and conversion), and where a conversion of validated JSON
failed: the path to the part that refused it."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import attrs

from retinue._errors import RetinueError

from ._execution import describe_failure

__all__ = ["Coerce", "Shape", "raise_at"]

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
        return f"{self.path}: {describe_failure(self.cause)}"


def raise_at(segment: str, exc: Exception) -> NoReturn:
    """Raise *exc*, a part's refusal, placed at *segment* before the path it already has.

    A container converts each part once and places its refusal as it passes up:
    converting the parts again to find the one that refused would double the work
    at each level of the value.
    """
    if isinstance(exc, _ArgumentError):
        raise _ArgumentError(segment + exc.path, exc.cause) from exc.cause
    raise _ArgumentError(segment, exc) from exc
