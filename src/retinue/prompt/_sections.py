"""System-prompt sections and strict ``{{variable}}`` rendering (R7.51-R7.53)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import final

import attrs

from retinue._errors import RetinueError
from retinue._request import ToolSchema

__all__ = ["Assembly", "PromptError", "Section", "render"]

_GROUP = re.compile(r"\{\{(.*?)\}\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


class PromptError(RetinueError):
    """The system prompt cannot be rendered (unknown variable, malformed group)."""

    code = "PROMPT_RENDER"


@final
@attrs.frozen
class Section:
    """One system-prompt section; lower ``order`` comes first (identity -100, persona 0)."""

    name: str
    text: str
    order: int = 0


def _variables(value: Mapping[str, str | None]) -> Mapping[str, str | None]:
    return dict(value)


def _sections(value: Iterable[Section]) -> tuple[Section, ...]:
    return tuple(value)


def _tools(value: Iterable[ToolSchema]) -> tuple[ToolSchema, ...]:
    return tuple(value)


@final
@attrs.frozen
class Assembly:
    """What the next request's system prompt and tool list are built from (R7.51).

    A ``system-prompt/assemble`` listener receives one and returns one (often
    ``attrs.evolve(assembly, ...)``): sections are rendered in ascending
    ``order`` with ``variables``, and ``tools`` is the request's tool list.
    """

    sections: tuple[Section, ...] = attrs.field(converter=_sections)
    tools: tuple[ToolSchema, ...] = attrs.field(converter=_tools)
    variables: Mapping[str, str | None] = attrs.field(converter=_variables)

    def render(self) -> str:
        """The system prompt text (R7.52); see :func:`render`."""
        return render(self.sections, self.variables)


def _interpolate(text: str, variables: Mapping[str, str | None], where: str) -> str:
    def substitute(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        if not _NAME.fullmatch(name):
            raise PromptError(f"malformed variable group {match.group(0)!r} in section {where!r}")
        if name not in variables:
            raise PromptError(f"unknown variable {name!r} in section {where!r}")
        value = variables[name]
        if value is None:
            raise PromptError(f"variable {name!r} has no value (section {where!r})")
        return value

    return _GROUP.sub(substitute, text)


def render(sections: Iterable[Section], variables: Mapping[str, str | None]) -> str:
    """Render sections in ascending order, dropping empty ones, joined by blank lines.

    Raises:
        PromptError: an unknown, valueless or malformed ``{{variable}}``.
    """
    parts = []
    for section in sorted(sections, key=lambda item: item.order):
        if "{{" in section.text and section.text.count("{{") != section.text.count("}}"):
            raise PromptError(f"unbalanced variable group in section {section.name!r}")
        text = _interpolate(section.text, variables, section.name).strip()
        if text:
            parts.append(text)
    return "\n\n".join(parts)
