"""Typed seam decisions (SPEC 6.3)."""

from __future__ import annotations

from typing import Any, TypeAlias, cast, final

import attrs

from retinue._content import (
    ContentBlock,
    as_content,
    as_prompt,
    check_optional_str,
    check_str,
    says_nothing,
)
from retinue._sources import HookContext

__all__ = [
    "Accept",
    "Allow",
    "Ask",
    "Block",
    "ContinuationDecision",
    "Continue",
    "Deny",
    "PostToolDecision",
    "PreToolDecision",
    "PromptDecision",
    "Stop",
]


def _context_field() -> HookContext | None:
    # Checked when the decision is built, so a listener's mistake is reported at its own line.
    return attrs.field(default=None, converter=_blank_as_none, validator=_optional_context)


def _steering_field() -> HookContext | None:
    """A ``Continue`` reason: a blank one is refused, not taken as none. Taken as none it
    would run another step with nothing new for the model, which answers its own reply
    again, step after step."""
    return attrs.field(default=None, validator=[_optional_context, _refuse_blank_context])


def _refuse_blank_context(
    decision: object, attribute: attrs.Attribute[HookContext | None], value: object
) -> None:
    """An attrs validator: a context that may be absent, never one saying nothing."""
    if type(value) is HookContext and _blank_context(value):
        raise ValueError(
            f"{type(decision).__name__}.{attribute.name} must not be a blank HookContext: "
            "leave it None to continue without steering, or return Stop() to end the turn"
        )


def _blank_as_none(value: object) -> object:
    """A :class:`HookContext` holding nothing but text of only whitespace (or no block) is
    none: shown, it would be an empty ``<context>`` or ``<steering>`` block saying nothing.
    A lookup that found nothing is a common context, so it is no error."""
    if type(value) is HookContext and _blank_context(value):
        return None
    return value


def _optional_context(
    decision: object, attribute: attrs.Attribute[HookContext | None], value: object
) -> None:
    """An attrs validator: a :class:`HookContext` or None, with a hint for bare content."""
    if value is None:
        return
    if type(value) is HookContext:
        return
    # Named as users import it: the class's own module is private.
    raise TypeError(
        f"{type(decision).__name__}.{attribute.name} must be a retinue.HookContext or None, "
        f"got {type(value).__name__}{_wrapping_hint(value)}"
    )


def _blank_context(context: HookContext) -> bool:
    """Whether *context* holds nothing but text of only whitespace (or no block at all)."""
    return says_nothing(context.content)


def _wrapping_hint(value: object) -> str:
    """How to make *value* a context, when it is content a :class:`HookContext` would take."""
    if isinstance(value, str):
        return ' (wrap text as retinue.HookContext("..."))'
    try:
        as_content(cast("Any", value))
    except TypeError:
        return ""
    return " (wrap content blocks as retinue.HookContext(...))"


def _blank(value: object) -> bool:
    return isinstance(value, str) and not value.strip()


def _reason(decision: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: a str holding more than whitespace, all the model is shown."""
    check_str(decision, attribute, value)
    if _blank(value):
        raise ValueError(
            f"{type(decision).__name__}.{attribute.name} must not be empty or blank: "
            f"the model would be shown an empty error for its call, got {value!r}"
        )


def _not_blank(decision: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: a reason that may be absent (its default), never only whitespace.

    Absent, another text stands in for it; a blank one would be shown as it
    is, an ``Error:`` saying nothing.
    """
    if value and _blank(value):
        raise ValueError(
            f"{type(decision).__name__}.{attribute.name} must not be blank: leave it "
            f"{attribute.default!r} for no reason, got {value!r}"
        )


def _blank_as_empty(value: str) -> str:
    return "" if _blank(value) else value


def _optional_content(
    value: str | ContentBlock | tuple[ContentBlock, ...] | list[ContentBlock] | None,
) -> tuple[ContentBlock, ...] | None:
    return None if value is None else as_content(value)


def _feedback(
    value: str | ContentBlock | tuple[ContentBlock, ...] | list[ContentBlock] | None,
) -> tuple[ContentBlock, ...] | None:
    """A ``Block``'s feedback, none when it holds nothing but text of only whitespace (or
    no block): shown in place of the reason, it would be an error saying nothing."""
    content = _optional_content(value)
    if content is not None and says_nothing(content):
        return None
    return content


def _optional_prompt(
    value: str | ContentBlock | tuple[ContentBlock, ...] | list[ContentBlock] | None,
) -> tuple[ContentBlock, ...] | None:
    return None if value is None else as_prompt(value)


@final
@attrs.frozen
class Allow:
    """Let a prompt or tool call through; ``content`` replaces a prompt (R6.6)."""

    content: tuple[ContentBlock, ...] | None = attrs.field(default=None, converter=_optional_prompt)
    additional_context: HookContext | None = _context_field()


@final
@attrs.frozen
class Block:
    """Veto a prompt (``reason``) or a tool result (``feedback`` replaces it, R6.9)."""

    # May be empty: a prompt is blocked without one, and feedback may stand in for it.
    # A blank one is no reason either, where a Deny's or an Ask's would be shown as it is;
    # blank feedback likewise is none, so the reason stands in for it.
    reason: str = attrs.field(default="", converter=_blank_as_empty, validator=check_str)
    feedback: tuple[ContentBlock, ...] | None = attrs.field(default=None, converter=_feedback)
    additional_context: HookContext | None = _context_field()


@final
@attrs.frozen
class Continue:
    """Run another step; ``reason`` is delivered as steering (R7.27)."""

    reason: HookContext | None = _steering_field()


@final
@attrs.frozen
class Stop:
    """End the turn after this step."""


@final
@attrs.frozen
class Deny:
    """Refuse a tool call; the model sees ``Error: <reason>`` (R6.8)."""

    reason: str = attrs.field(validator=_reason)


@final
@attrs.frozen
class Ask:
    """Ask for approval; without an approval service it degrades to a denial."""

    # An empty reason is no reason: the denial names the tool instead.
    reason: str | None = attrs.field(default=None, validator=[check_optional_str, _not_blank])


@final
@attrs.frozen
class Accept:
    """Accept a tool result; ``content`` replaces it, keeping its error flags (R9.3)."""

    content: tuple[ContentBlock, ...] | None = attrs.field(
        default=None, converter=_optional_content
    )
    additional_context: HookContext | None = _context_field()


PromptDecision: TypeAlias = Allow | Block
"""What an ``agent/prompt-submit`` listener returns: let the prompt in, or block it."""
ContinuationDecision: TypeAlias = Continue | Stop
"""What an ``agent/turn-continuation`` listener returns: run another step, or end the turn."""
PreToolDecision: TypeAlias = Allow | Deny | Ask
"""What a ``tools/pre-execute`` listener returns: run the call, refuse it, or ask first."""
PostToolDecision: TypeAlias = Accept | Block
"""What a ``tools/post-execute`` listener returns: keep the result, or replace it with a refusal."""
