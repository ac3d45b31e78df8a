"""Per-agent options (R2.5, R2.6): frozen and validated at construction."""

from __future__ import annotations

import os
from typing import final

import attrs

from ._content import whole
from ._errors import ConfigError
from ._lossless import is_finite_number, shown_short
from ._request import stop_tuple
from .prompt import PromptError, Section, check_template

__all__ = [
    "PERSONA",
    "AgentOptions",
    "check_prompt_option",
    "cwd_problem",
    "name_problem",
    "persona_sections",
]

MAX_SAFE_INTEGER = 2**53 - 1
# The runtime's persona and an agent's share this name, so the agent's shadows it (R2.7).
PERSONA = "persona"


def _check_count(
    _instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is None:
        return
    if type(value) is not int or not 0 < value <= MAX_SAFE_INTEGER:
        raise ConfigError(
            f"{attribute.name} must be a positive integer <= 2**53-1, got {shown_short(value)}"
        )


def _check_temperature(_instance: object, _attribute: object, value: float | None) -> None:
    if value is None:
        return
    if not is_finite_number(value):
        raise ConfigError(f"temperature must be a finite number, got {shown_short(value)}")
    if value < 0:
        # Every provider refuses one: each of the agent's turns would fail alike.
        raise ConfigError(f"temperature must not be negative, got {shown_short(value)}")


def cwd_problem(value: object) -> str | None:
    """Why *value* cannot be a working directory (recorded in the session header), or None."""
    if not isinstance(value, str):
        return f"must be an absolute path as a str, got {shown_short(value)}"
    if not os.path.isabs(value):
        return f"must be an absolute path, got {shown_short(value)}"
    if "\x00" in value:
        return f"must not contain a NUL character, got {shown_short(value)}"
    return None


def name_problem(value: object) -> str | None:
    """Why *value* cannot name a model or provider (a request would carry it), or None."""
    if not isinstance(value, str) or not value.strip():
        return f"must be a non-empty string, got {shown_short(value)}"
    return None


def _check_cwd(_instance: object, _attribute: object, value: str | None) -> None:
    if value is not None and (problem := cwd_problem(value)) is not None:
        raise ConfigError(f"cwd {problem}")


def _check_name(_instance: object, attribute: attrs.Attribute[str], value: str | None) -> None:
    if value is not None and (problem := name_problem(value)) is not None:
        raise ConfigError(f"{attribute.name} {problem}")


def check_prompt_option(option: str, value: object, section: str) -> None:
    """Check a system-prompt option's template syntax when it is given.

    Variables are looked up per turn (their values may change); a syntax
    error would fail every turn, so it is refused now.

    Raises:
        ConfigError: *value* is not a string or not a valid template.
    """
    if value is None:
        return
    if not isinstance(value, str):
        raise ConfigError(f"{option} must be a string, got {shown_short(value)}")
    try:
        check_template(value, section)
    except PromptError as exc:
        raise ConfigError(f"{option} is not a valid prompt template: {exc.message}") from exc


def _check_prompt(_instance: object, _attribute: object, value: str | None) -> None:
    check_prompt_option("system_prompt", value, PERSONA)


def persona_sections(system_prompt: str | None) -> tuple[Section, ...]:
    """The order-0 persona section a ``system_prompt`` option registers; none for ``None`` (R2.7).

    Given to ``open_runtime`` it is deployment config; given to an agent it
    shadows that one, the two being sections of the same name. An empty one
    is a persona too: an agent's ``""`` leaves it none, as ``"   "`` does.
    """
    return () if system_prompt is None else (Section(PERSONA, system_prompt, 0),)


@final
@attrs.frozen
class AgentOptions:
    """How an agent calls its model.

    ``system_prompt`` registers an agent-scoped persona section, which
    replaces the runtime's (R2.7); a missing ``model`` is not an error until
    the first step (R2.8). ``None`` leaves ``max_tokens``, ``temperature``
    and ``stop`` to the model's default; a ``system_prompt`` of ``None``
    leaves the runtime's persona in place, and a ``cwd`` of ``None`` gives
    the session no working directory.

    Raises:
        ConfigError: a field is of the wrong type or out of range (``INVALID_CONFIG``,
            the message naming the field), or ``system_prompt`` is no valid template.
    """

    model: str | None = attrs.field(default=None, validator=_check_name)
    """The model name each request carries, and a ``ModelRouter`` routes by; non-empty."""
    provider: str | None = attrs.field(default=None, validator=_check_name)
    """The provider a ``ModelRouter`` routes by, beside ``model``; non-empty."""
    max_tokens: int | None = attrs.field(default=None, validator=_check_count)
    """The cap on an answer's tokens, an int in 1..2**53-1."""
    temperature: float | None = attrs.field(default=None, validator=_check_temperature)
    """The sampling temperature, a finite number, not negative (no provider takes one)."""
    stop: tuple[str, ...] | None = attrs.field(default=None, converter=stop_tuple)
    """Stop sequences: a list or tuple of non-empty strings (a bare str is refused)."""
    system_prompt: str | None = attrs.field(default=None, validator=_check_prompt)
    """The agent's persona, a template with ``{{variables}}``, checked when given."""
    cwd: str | None = attrs.field(default=None, converter=whole, validator=_check_cwd)
    """The session's working directory, an absolute path, kept in its header."""
    max_steps: int | None = attrs.field(default=None, validator=_check_count)
    """The most steps (model calls) one turn may take, an int in 1..2**53-1; ``None`` for
    no limit. A turn whose model still asks for tools after its last allowed step (or a
    turn-continuation listener's ``Continue``) ends ``error`` with code ``MAX_STEPS``
    (:class:`~retinue.actors.StepLimitError`), every tool call it made answered; steering
    sent during the last step is the next turn's prompt. Not stored with the session: a
    resume takes it from the options it is given."""
    max_prompts_per_turn: int | None = attrs.field(default=None, validator=_check_count)
    """The most queued prompts one turn takes, an int in 1..2**53-1; ``None`` (the default)
    takes every prompt queued when the turn starts (R3.8). With 1, two callers asking a
    busy agent get a turn each, and each its own answer, in the order they asked.
    Steering a turn left over is queued as prompts, each counted as one (with 1, two
    such steers run two turns). Not stored with the session, as ``max_steps`` is not."""
