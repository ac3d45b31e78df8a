"""A type's shape (its schema and conversion), and where a conversion of validated JSON
failed: the path to the part that refused it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NoReturn

import attrs

from retinue._errors import RetinueError

from ._execution import describe_failure

__all__ = ["Coerce", "Shape", "raise_located"]

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


def raise_located(parts: Iterable[tuple[str, Coerce, object]], exc: Exception) -> NoReturn:
    """Raise where a container's conversion failed: its parts are converted again one at a time.

    Only a failure pays for this; *parts* are (path segment, conversion, value).
    *exc* itself is raised again when no part fails again.
    """
    for segment, coerce, value in parts:
        try:
            coerce(value)
        except _ArgumentError as inner:
            raise _ArgumentError(segment + inner.path, inner.cause) from inner.cause
        except Exception as inner:
            raise _ArgumentError(segment, inner) from inner
    raise exc
