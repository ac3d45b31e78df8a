"""The session event catalogue (SPEC 4.3): one frozen class per event type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal, NamedTuple, TypeAlias, final, get_args

import attrs

from retinue._content import (
    USER_SOURCE,
    ContentBlock,
    Message,
    MessageSource,
    as_content,
    check_optional_str,
    check_str,
    snapshot_messages,
)
from retinue._errors import InvalidJsonError
from retinue._lossless import (
    FrozenDict,
    JsonValue,
    check_digits,
)
from retinue._request import LlmCallConfig, ToolSchema
from retinue._stream import StreamChunk, Usage

from ._fields import (
    BOUND,
    NEG_BOUND,
    as_tuple,
    bound_set_attribute,
    check_long,
    content_field,
    count,
    empty_is_none,
    exactly,
    frozen_json,
    integer,
    lines,
    not_integers,
    optional_integer,
    outside,
    schemas,
    set_attribute,
    source_field,
    wrong_type,
)

__all__ = [
    "RESERVED_TYPES",
    "SURFACE_TYPES",
    "AssistantChunk",
    "AssistantMessage",
    "ContextMessage",
    "CustomEvent",
    "EpochHeader",
    "Event",
    "EventData",
    "HeaderReason",
    "PromptBlocked",
    "Replace",
    "RequestHeader",
    "RequestHeaderDelta",
    "SessionHeader",
    "SteeringMessage",
    "StepEnd",
    "StepStart",
    "SurfaceOp",
    "SystemEdit",
    "ToolCallEvent",
    "ToolErrorInfo",
    "ToolResultEvent",
    "ToolsDelta",
    "TurnEnd",
    "TurnEndReason",
    "TurnStart",
    "TurnTrigger",
    "UserMessage",
]

FORMAT_VERSION = 0


@final
@attrs.frozen
class TurnTrigger:
    """Why a turn opened: queued messages or an idle injection."""

    kind: Literal["message", "injection"]
    source: MessageSource = MessageSource()

    def __attrs_post_init__(self) -> None:
        if self.kind not in _TRIGGER_KINDS:
            raise outside("turn trigger kind", self.kind, _TRIGGER_KINDS)
        if type(self.source) is not MessageSource:
            raise wrong_type(self, "source", "a MessageSource", self.source)


_TRIGGER_KINDS = ("message", "injection")


@final
@attrs.frozen
class TurnEndReason:
    """How a turn ended (R4.12); ``kind`` is open for extension."""

    kind: str = attrs.field(validator=check_str)
    reason: str | None = attrs.field(default=None, validator=check_optional_str)
    step: int | None = attrs.field(default=None, validator=optional_integer)
    message: str | None = attrs.field(default=None, validator=check_optional_str)
    code: str | None = attrs.field(default=None, validator=check_optional_str)

    @classmethod
    def completed(cls) -> TurnEndReason:
        """The turn ran to its end."""
        return _COMPLETED

    @classmethod
    def aborted(cls, reason: str | None = None) -> TurnEndReason:
        """The turn was cancelled, with the caller's reason."""
        return cls("aborted", reason=reason)

    @classmethod
    def error(cls, step: int, message: str, code: str | None = None) -> TurnEndReason:
        """The turn failed at *step* (0 = before any step)."""
        return cls("error", step=step, message=message, code=code)

    @classmethod
    def disposed(cls) -> TurnEndReason:
        """The agent was disposed during the turn."""
        return cls("disposed")

    @classmethod
    def max_tokens(cls) -> TurnEndReason:
        """A step of the turn was cut at the token limit."""
        return cls("max-tokens")

    @classmethod
    def rejected(cls, reason: str) -> TurnEndReason:
        """Every prompt of the batch was blocked; no step ran."""
        return cls("rejected", reason=reason)

    @classmethod
    def interrupted(cls) -> TurnEndReason:
        """A crash cut the turn short; synthesized by repair on load."""
        return cls("interrupted")


_COMPLETED = TurnEndReason("completed")


# TurnStart, TurnEnd and UserMessage are built every turn: like the step
# events, their checks sit inline in a hand-written __init__ (a validator per
# field would add a call each).


def _bad_turn(turn: object) -> None:
    """Raise for a turn that failed the inline test: not an int, or too long to write."""
    if type(turn) is not int:
        raise InvalidJsonError(f"turn must be an integer, got {turn!r}")
    check_digits(turn, "turn")


@final
@attrs.frozen(init=False)
class TurnStart:
    """A turn opens."""

    turn: int
    trigger: TurnTrigger
    type: ClassVar[str] = "turn/start"

    def __init__(self, turn: int, trigger: TurnTrigger) -> None:
        if type(turn) is not int or not NEG_BOUND <= turn <= BOUND:
            _bad_turn(turn)
        if type(trigger) is not TurnTrigger:
            raise wrong_type(self, "trigger", "a TurnTrigger", trigger)
        setattr_ = bound_set_attribute(self)
        setattr_("turn", turn)
        setattr_("trigger", trigger)


@final
@attrs.frozen(init=False)
class TurnEnd:
    """A turn closes; the durable commit boundary."""

    turn: int
    reason: TurnEndReason
    type: ClassVar[str] = "turn/end"

    def __init__(self, turn: int, reason: TurnEndReason) -> None:
        if type(turn) is not int or not NEG_BOUND <= turn <= BOUND:
            _bad_turn(turn)
        if type(reason) is not TurnEndReason:
            raise wrong_type(self, "reason", "a TurnEndReason", reason)
        setattr_ = bound_set_attribute(self)
        setattr_("turn", turn)
        setattr_("reason", reason)


def _turn_and_step_init(self: StepStart | StepEnd, turn: int, step: int) -> None:
    if type(turn) is not int or type(step) is not int:
        raise not_integers(self.type, turn, step)
    if not NEG_BOUND <= turn <= BOUND >= step >= NEG_BOUND:
        check_long(self.type, turn, step)
    set_attribute(self, "turn", turn)
    set_attribute(self, "step", step)


@final
@attrs.frozen(init=False)
class StepStart:
    """A step (one model call and its tools) opens."""

    turn: int
    step: int
    type: ClassVar[str] = "step/start"

    __init__ = _turn_and_step_init


@final
@attrs.frozen(init=False)
class StepEnd:
    """A step closes."""

    turn: int
    step: int
    type: ClassVar[str] = "step/end"

    __init__ = _turn_and_step_init


@final
@attrs.frozen(init=False)
class UserMessage:
    """An allowed (possibly rewritten) prompt."""

    content: tuple[ContentBlock, ...]
    source: MessageSource = USER_SOURCE  # the default the loader fills in too
    type: ClassVar[str] = "user/message"

    def __init__(
        self,
        content: str | ContentBlock | Sequence[ContentBlock],
        source: MessageSource = USER_SOURCE,
    ) -> None:
        if type(source) is not MessageSource:
            raise wrong_type(self, "source", "a MessageSource", source)
        setattr_ = bound_set_attribute(self)
        setattr_("content", as_content(content))
        setattr_("source", source)


@final
@attrs.frozen
class PromptBlocked:
    """The original content of a vetoed prompt."""

    content: tuple[ContentBlock, ...] = content_field()
    source: MessageSource = source_field()
    reason: str = attrs.field(default="", validator=check_str)
    type: ClassVar[str] = "prompt/blocked"


@final
@attrs.frozen
class ContextMessage:
    """Injected context (inject, additional context)."""

    content: tuple[ContentBlock, ...] = content_field()
    source: MessageSource = source_field()
    type: ClassVar[str] = "context/message"


@final
@attrs.frozen
class SteeringMessage:
    """Steering delivered between steps of a turn."""

    turn: int = attrs.field(validator=integer)
    content: tuple[ContentBlock, ...] = content_field()
    source: MessageSource = source_field()
    type: ClassVar[str] = "steering/message"


class _ChunkFields(NamedTuple):
    turn: int
    step: int
    chunk: StreamChunk


@final
class AssistantChunk(_ChunkFields):
    """One raw stream chunk, in order.

    A named tuple like :class:`Event`, and for the same reason: one is built
    per stream chunk. Its fields are ``turn``, ``step`` and ``chunk``.
    """

    __slots__ = ()
    type: ClassVar[str] = "assistant/chunk"


@final
@attrs.frozen
class AssistantMessage:
    """The assembled assistant message of a step."""

    turn: int
    step: int
    content: tuple[ContentBlock, ...] = content_field()
    usage: Usage | None = None
    type: ClassVar[str] = "assistant/message"

    def __attrs_post_init__(self) -> None:
        turn, step, usage = self.turn, self.step, self.usage
        if type(turn) is not int or type(step) is not int:
            raise not_integers(self.type, turn, step)
        if not NEG_BOUND <= turn <= BOUND >= step >= NEG_BOUND:
            check_long(self.type, turn, step)
        if type(usage) is not Usage and usage is not None:
            raise wrong_type(self, "usage", "a Usage or None", usage)


@final
@attrs.frozen(init=False)
class ToolCallEvent:
    """Audit record of a tool call, with the raw arguments."""

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str
    type: ClassVar[str] = "tool/call"

    def __init__(self, turn: int, step: int, call_id: str, name: str, arguments: str) -> None:
        if type(turn) is not int or type(step) is not int:
            raise not_integers(self.type, turn, step)
        if not NEG_BOUND <= turn <= BOUND >= step >= NEG_BOUND:
            check_long(self.type, turn, step)
        if type(call_id) is not str or type(name) is not str or type(arguments) is not str:
            raise InvalidJsonError(
                "tool/call: call_id, name and arguments (the raw JSON text) must be strings, "
                f"got {call_id!r}, {name!r}, {arguments!r}"
            )
        setattr_ = bound_set_attribute(self)  # bound once for five fields, as attrs does
        setattr_("turn", turn)
        setattr_("step", step)
        setattr_("call_id", call_id)
        setattr_("name", name)
        setattr_("arguments", arguments)


@final
@attrs.frozen
class ToolErrorInfo:
    """A coded harness error attached to a tool result."""

    name: str = attrs.field(validator=check_str)
    code: str = attrs.field(validator=check_str)


@final
@attrs.frozen
class ToolResultEvent:
    """The result of one tool call, keyed by the model's call id."""

    turn: int
    step: int
    call_id: str
    content: tuple[ContentBlock, ...] = content_field()
    is_error: bool = False
    error: ToolErrorInfo | None = None
    meta: JsonValue = attrs.field(default=None, converter=frozen_json)
    type: ClassVar[str] = "tool/result"

    def __attrs_post_init__(self) -> None:
        # One check for all fields, cheaper than a validator per field.
        turn, step, error = self.turn, self.step, self.error
        if type(turn) is not int or type(step) is not int:
            raise not_integers(self.type, turn, step)
        if not NEG_BOUND <= turn <= BOUND >= step >= NEG_BOUND:
            check_long(self.type, turn, step)
        if type(self.is_error) is not bool:
            raise InvalidJsonError(f"tool/result: is_error must be a bool, got {self.is_error!r}")
        if type(self.call_id) is not str:
            raise wrong_type(self, "call_id", "a str", self.call_id)
        if type(error) is not ToolErrorInfo and error is not None:
            raise wrong_type(self, "error", "a ToolErrorInfo or None", error)


@final
@attrs.frozen
class EpochHeader:
    """The canonical request header (R8.2): empty values are absent."""

    config: LlmCallConfig = attrs.field(validator=exactly(LlmCallConfig))
    system: str | None = attrs.field(
        default=None, converter=empty_is_none, validator=check_optional_str
    )
    tools: tuple[ToolSchema, ...] = attrs.field(default=(), converter=as_tuple, validator=schemas)
    message_prefix: tuple[Message, ...] = attrs.field(default=(), converter=snapshot_messages)


HeaderReason: TypeAlias = Literal["initial", "resume", "fallback"]


@final
@attrs.frozen
class RequestHeader:
    """A full request header snapshot."""

    header: EpochHeader
    reason: HeaderReason
    type: ClassVar[str] = "request/header"

    def __attrs_post_init__(self) -> None:
        if self.reason not in _HEADER_REASONS:
            raise outside("request/header reason", self.reason, _HEADER_REASONS)
        if type(self.header) is not EpochHeader:
            raise wrong_type(self, "header", "an EpochHeader", self.header)


_HEADER_REASONS: tuple[str, ...] = get_args(HeaderReason)


@final
@attrs.frozen
class SystemEdit:
    """A line edit of the system prompt: keep a prefix and suffix, insert lines between."""

    keep_start: int = attrs.field(validator=count)
    keep_end: int = attrs.field(validator=count)
    insert: tuple[str, ...] = attrs.field(default=(), converter=as_tuple, validator=lines)


@final
@attrs.frozen
class ToolsDelta:
    """Tool changes keyed by name: removed dropped, changed in place, added appended."""

    added: tuple[ToolSchema, ...] = attrs.field(default=(), converter=as_tuple, validator=schemas)
    removed: tuple[str, ...] = attrs.field(default=(), converter=as_tuple, validator=lines)
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
        default=None, converter=attrs.converters.optional(snapshot_messages)
    )
    type: ClassVar[str] = "request/header-delta"


@final
@attrs.frozen
class CustomEvent:
    """An event type retinue does not model (plugins, newer versions); kept verbatim.

    Its type may not be empty nor the name of a built-in event type (or of the
    stored header line, ``session``): loaded back, such a record would be read
    as that type, not as this event.
    """

    type: str = attrs.field(validator=lambda _event, _field, value: _check_custom_type(value))
    data: JsonValue = attrs.field(factory=FrozenDict, converter=frozen_json)


def _check_custom_type(value: object) -> None:
    if not isinstance(value, str) or not value or value in RESERVED_TYPES:
        raise ValueError(f"{value!r} cannot be a custom event type (empty or reserved)")


EventData: TypeAlias = (
    TurnStart
    | TurnEnd
    | StepStart
    | StepEnd
    | UserMessage
    | PromptBlocked
    | ContextMessage
    | SteeringMessage
    | AssistantChunk
    | AssistantMessage
    | ToolCallEvent
    | ToolResultEvent
    | RequestHeader
    | RequestHeaderDelta
    | CustomEvent
)

RESERVED_TYPES = frozenset(
    {"session", *(kind.type for kind in get_args(EventData) if kind is not CustomEvent)}
)
"""Names no :class:`CustomEvent` may take: the built-in event types and the header line's."""

SURFACE_TYPES = frozenset(
    {"user/message", "assistant/message", "tool/result", "context/message", "steering/message"}
)


@final
@attrs.frozen
class Replace:
    """Surface op: replace the surface nodes from ``start`` through ``end`` with this event."""

    start: int = attrs.field(validator=integer)
    end: int = attrs.field(validator=integer)


SurfaceOp: TypeAlias = Literal["append"] | Replace


@final
class Event(NamedTuple):
    """One logged event: ``seq`` equals its index in the log, ``time`` is epoch ms.

    An immutable record like every value here, but a named tuple rather than
    an attrs class: a session creates one per stream chunk, and a tuple is
    built in a third of the time of a frozen attrs instance. Copy with
    changes through ``event._replace(...)``.
    """

    seq: int
    time: int
    data: EventData
    source_event_seqs: tuple[int, ...] | None = None
    surface_op: SurfaceOp | None = None

    @property
    def type(self) -> str:
        """The wire type tag, e.g. ``"turn/start"``."""
        return self.data.type


@final
@attrs.frozen
class SessionHeader:
    """Out-of-log session metadata (R4.1); never part of history."""

    id: str
    created_at: int
    version: int = FORMAT_VERSION
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
