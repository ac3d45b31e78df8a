"""Request-header fold and delta encoding (SPEC 8); pure functions."""

from __future__ import annotations

import attrs

from retinue._errors import SessionError
from retinue._lossless import same_json, shown
from retinue._request import ToolSchema

from ._events import EpochHeader, RequestHeader, RequestHeaderDelta, SystemEdit, ToolsDelta

__all__ = ["apply_delta", "fold_header", "make_delta"]


def _lines(text: str | None) -> list[str]:
    return [] if text is None else text.split("\n")


def _edit_system(old: str | None, new: str | None) -> SystemEdit:
    before, after = _lines(old), _lines(new)
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    limit = min(len(before), len(after)) - start
    while end < limit and before[-1 - end] == after[-1 - end]:
        end += 1
    return SystemEdit(start, end, tuple(after[start : len(after) - end]))


def _apply_system(old: str | None, edit: SystemEdit) -> str | None:
    before = _lines(old)
    if edit.keep_start + edit.keep_end > len(before):
        raise SessionError("system edit keeps more lines than exist", code="CORRUPT_HEADER")
    kept_end = before[len(before) - edit.keep_end :] if edit.keep_end else []
    lines = [*before[: edit.keep_start], *edit.insert, *kept_end]
    return "\n".join(lines) if lines else None


def _tools_delta(old: EpochHeader, new: EpochHeader) -> ToolsDelta:
    before = {tool.name: tool for tool in old.tools}
    after = {tool.name: tool for tool in new.tools}
    return ToolsDelta(
        added=tuple(tool for tool in new.tools if tool.name not in before),
        removed=tuple(name for name in before if name not in after),
        changed=tuple(
            tool
            for tool in new.tools
            if tool.name in before and not same_json(before[tool.name], tool)
        ),
    )


def _apply_tools(old: EpochHeader, delta: ToolsDelta) -> tuple[ToolSchema, ...]:
    """*old*'s tools amended by *delta*, which must name them as they are.

    A delta that removes or changes a tool the header lacks, or adds one it
    keeps, was not made from this header: folded anyway, it would rebuild a
    request no model was sent. A name listed twice (an assembly listener's
    tools may be) is taken as the request had it.
    """
    names = {tool.name for tool in old.tools}
    for name in (*delta.removed, *(tool.name for tool in delta.changed)):
        if name not in names:
            raise SessionError(
                f"tools delta names {name!r}, which the header lacks", code="CORRUPT_HEADER"
            )
    removed = set(delta.removed)
    changed = {tool.name: tool for tool in delta.changed}
    kept = [changed.get(tool.name, tool) for tool in old.tools if tool.name not in removed]
    if not {tool.name for tool in kept}.isdisjoint(tool.name for tool in delta.added):
        raise SessionError("tools delta adds a tool the header keeps", code="CORRUPT_HEADER")
    return (*kept, *delta.added)


def make_delta(old: EpochHeader, new: EpochHeader) -> RequestHeaderDelta | None:
    """Return a delta turning *old* into *new*, or ``None`` if none round-trips (R8.4).

    Parts are compared as JSON, not by ``==``: a schema's ``false`` that became
    ``0``, or a temperature ``1`` that became ``1.0``, is sent differently, so
    it is a change the log must record.

    Raises:
        TypeError: *old* or *new* is not an :class:`EpochHeader`.
    """
    _check_type("make_delta", "old", old, EpochHeader)
    _check_type("make_delta", "new", new, EpochHeader)
    delta = RequestHeaderDelta(
        system=_edit_system(old.system, new.system) if old.system != new.system else None,
        tools=None if same_json(old.tools, new.tools) else _tools_delta(old, new),
        config=None if same_json(old.config, new.config) else new.config,
        message_prefix=(
            None if same_json(old.message_prefix, new.message_prefix) else new.message_prefix
        ),
    )
    try:
        round_trip = apply_delta(old, delta)
    except SessionError:
        return None
    # Only what the delta rebuilt can differ: every other part is new's own or was found the same.
    if round_trip.system != new.system:
        return None
    if delta.tools is not None and not same_json(round_trip.tools, new.tools):
        return None
    return delta


def apply_delta(old: EpochHeader, delta: RequestHeaderDelta) -> EpochHeader:
    """Amend *old* with *delta* (R8.5).

    Raises:
        TypeError: *old* is not an :class:`EpochHeader` or *delta* not a
            :class:`RequestHeaderDelta`.
        SessionError: *delta* was not made from *old* (``CORRUPT_HEADER``).
    """
    _check_type("apply_delta", "old", old, EpochHeader)
    _check_type("apply_delta", "delta", delta, RequestHeaderDelta)
    header = old
    if delta.system is not None:
        header = attrs.evolve(header, system=_apply_system(header.system, delta.system))
    if delta.tools is not None:
        header = attrs.evolve(header, tools=_apply_tools(header, delta.tools))
    if delta.config is not None:
        header = attrs.evolve(header, config=delta.config)
    if delta.message_prefix is not None:
        header = attrs.evolve(header, message_prefix=delta.message_prefix)
    return header


def fold_header(
    current: EpochHeader | None, data: RequestHeader | RequestHeaderDelta
) -> EpochHeader:
    """Fold one header event into the current header (R8.3, R4.18).

    Raises:
        TypeError: *data* is no header event, or *current* neither ``None`` nor an
            :class:`EpochHeader`.
        SessionError: a delta with no header before it, or one not made from
            *current* (``CORRUPT_HEADER``).
    """
    if type(data) is RequestHeader:
        return data.header
    _check_type("fold_header", "data", data, RequestHeaderDelta, "a RequestHeader or")
    if current is not None:
        _check_type("fold_header", "current", current, EpochHeader, "None or")
    if current is None:
        raise SessionError(
            "request/header-delta precedes the first request/header", code="CORRUPT_HEADER"
        )
    return apply_delta(current, data)


def _check_type(function: str, name: str, value: object, kind: type, alternative: str = "") -> None:
    """Refuse *value* unless it is a *kind* (a final class): what a misplaced argument
    reaches first is an attribute it lacks, an ``AttributeError`` naming no argument."""
    if type(value) is not kind:
        article = "an" if kind.__name__[0] in "AEIOU" else "a"
        expected = f"{alternative} {article} {kind.__name__}".strip()
        raise TypeError(f"{function}: {name} must be {expected}, got {shown(value)}")
