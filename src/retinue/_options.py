"""Per-agent options (R2.5, R2.6): frozen and validated at construction."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import final

import attrs

from ._errors import ConfigError
from ._lossless import is_finite_number

__all__ = ["AgentOptions"]

MAX_SAFE_INTEGER = 2**53 - 1


def _check_max_tokens(_instance: object, _attribute: object, value: int | None) -> None:
    if value is None:
        return
    if type(value) is not int or not 0 < value <= MAX_SAFE_INTEGER:
        raise ConfigError(f"max_tokens must be a positive integer <= 2**53-1, got {value!r}")


def _check_temperature(_instance: object, _attribute: object, value: float | None) -> None:
    if value is not None and not is_finite_number(value):
        raise ConfigError(f"temperature must be a finite number, got {value!r}")


def _check_cwd(_instance: object, _attribute: object, value: str | None) -> None:
    if value is not None and not os.path.isabs(value):
        raise ConfigError(f"cwd must be an absolute path, got {value!r}")


def _stop_tuple(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@final
@attrs.frozen
class AgentOptions:
    """How an agent calls its model.

    ``system_prompt`` registers an agent-scoped persona section (R2.7);
    a missing ``model`` is not an error until the first step (R2.8).
    """

    model: str | None = None
    provider: str | None = None
    max_tokens: int | None = attrs.field(default=None, validator=_check_max_tokens)
    temperature: float | None = attrs.field(default=None, validator=_check_temperature)
    stop: tuple[str, ...] | None = attrs.field(default=None, converter=_stop_tuple)
    system_prompt: str | None = None
    cwd: str | None = attrs.field(default=None, validator=_check_cwd)
