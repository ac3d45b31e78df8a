"""The request-header events (SPEC 4.3, 8): a full header snapshot and an amendment of it."""

from __future__ import annotations

from typing import ClassVar, Literal, TypeAlias, final, get_args

import attrs

from retinue._content import Message, check_optional_str, snapshot_messages
from retinue._request import LlmCallConfig, ToolSchema

from ._fields import (
    as_tuple,
    count,
    empty_is_none,
    exactly,
    joined_lines,
    lines,
    outside,
    schemas,
    storable_prefix,
    wrong_type,
)

__all__ = [
    "EpochHeader",
    "HeaderReason",
    "RequestHeader",
    "RequestHeaderDelta",
    "SystemEdit",
    "ToolsDelta",
]


@final
@attrs.frozen
class EpochHeader:
    """The canonical request header (R8.2): empty values are absent."""

    config: LlmCallConfig = attrs.field(validator=exactly(LlmCallConfig))
    system: str | None = attrs.field(
        default=None, converter=empty_is_none, validator=check_optional_str
    )
    tools: tuple[ToolSchema, ...] = attrs.field(default=(), converter=as_tuple, validator=schemas)
    message_prefix: tuple[Message, ...] = attrs.field(
        default=(),
        converter=snapshot_messages,
        validator=storable_prefix,
    )


HeaderReason: TypeAlias = Literal["initial", "resume", "fallback"]
"""Why a full request header was logged: the session's first, the first after a resume,
or a change a ``request/header-delta`` cannot express (a reordering of the tools, say)."""


@final
@attrs.frozen
class RequestHeader:
    """A full request header snapshot."""

    header: EpochHeader
    reason: HeaderReason
    type: ClassVar[str] = "request/header"

    def __attrs_post_init__(self) -> None:
        reason: object = self.reason  # a value built in Python may be any str
        if type(reason) is not str and isinstance(reason, str):
            # Held and judged by its text, as it is logged and reloaded.
            reason = str.__str__(reason)
            object.__setattr__(self, "reason", reason)
        if reason not in _HEADER_REASONS:
            raise outside("request/header reason", reason, _HEADER_REASONS)
        if type(self.header) is not EpochHeader:
            raise wrong_type(self, "header", "an EpochHeader", self.header)


_HEADER_REASONS: tuple[str, ...] = get_args(HeaderReason)


@final
@attrs.frozen
class SystemEdit:
    """A line edit of the system prompt: keep a prefix and suffix, insert lines between."""

    keep_start: int = attrs.field(validator=count)
    keep_end: int = attrs.field(validator=count)
    insert: tuple[str, ...] = attrs.field(default=(), converter=joined_lines, validator=lines)


@final
@attrs.frozen
class ToolsDelta:
    """Tool changes keyed by name: removed dropped, changed in place, added appended."""

    added: tuple[ToolSchema, ...] = attrs.field(default=(), converter=as_tuple, validator=schemas)
    removed: tuple[str, ...] = attrs.field(default=(), converter=joined_lines, validator=lines)
    changed: tuple[ToolSchema, ...] = attrs.field(default=(), converter=as_tuple, validator=schemas)


@final
@attrs.frozen
class RequestHeaderDelta:
    """An amendment of the folded header."""

    system: SystemEdit | None = attrs.field(
        default=None, validator=exactly(SystemEdit, optional=True)
    )
    tools: ToolsDelta | None = attrs.field(
        default=None, validator=exactly(ToolsDelta, optional=True)
    )
    config: LlmCallConfig | None = attrs.field(
        default=None, validator=exactly(LlmCallConfig, optional=True)
    )
    message_prefix: tuple[Message, ...] | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(snapshot_messages),
        validator=storable_prefix,
    )
    type: ClassVar[str] = "request/header-delta"
