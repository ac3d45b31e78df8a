"""The events of a turn (SPEC 4.3): boundaries, steps, messages, model output and tool calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, NamedTuple, final

import attrs

from retinue._content import (
    ContentBlock,
    ToolResultBlock,
    check_optional_str,
    check_str,
    plain_field,
    whole,
)
from retinue._errors import InvalidJsonError
from retinue._lossless import SMALL_INT, JsonValue, freeze_json, joined_surrogates, shown
from retinue._slots import slot_setters
from retinue._sources import USER_SOURCE, MessageSource
from retinue._stream import StreamChunk, Usage

from ._fields import (
    NEG_SMALL_INT,
    check_turn,
    check_turn_and_step,
    content_field,
    event_content,
    integer,
    optional_integer,
    outside,
    set_attribute,
    source_field,
    wrong_type,
)
from ._nesting import check_blocks

__all__ = [
    "AssistantChunk",
    "AssistantMessage",
    "ContextMessage",
    "PromptBlocked",
    "SteeringMessage",
    "StepEnd",
    "StepStart",
    "ToolCallEvent",
    "ToolErrorInfo",
    "ToolResultEvent",
    "TurnEnd",
    "TurnEndReason",
    "TurnStart",
    "TurnTrigger",
    "UserMessage",
]


@final
@attrs.frozen
class TurnTrigger:
    """Why a turn opened: queued messages or an idle injection."""

    kind: Literal["message", "injection"]
    source: MessageSource = MessageSource()

    def __attrs_post_init__(self) -> None:
        kind: object = self.kind  # a value built in Python may be any str
        if type(kind) is not str and isinstance(kind, str):
            # Held and judged by its text, as it is logged and reloaded.
            kind = str.__str__(kind)
            set_attribute(self, "kind", kind)
        if kind not in _TRIGGER_KINDS:
            raise outside("turn trigger kind", kind, _TRIGGER_KINDS)
        if type(self.source) is not MessageSource:
            raise wrong_type(self, "source", "a MessageSource", self.source)


_TRIGGER_KINDS = ("message", "injection")


@final
@attrs.frozen
class TurnEndReason:
    """How a turn ended (R4.12); ``kind`` is open for extension."""

    # Its strings (a cancel's reason, an error's message) come from the caller and
    # the model: each is joined as a block's text is (R1.6).
    kind: str = attrs.field(converter=whole, validator=check_str)
    reason: str | None = attrs.field(default=None, converter=whole, validator=check_optional_str)
    step: int | None = attrs.field(default=None, validator=optional_integer)
    message: str | None = attrs.field(default=None, converter=whole, validator=check_optional_str)
    code: str | None = attrs.field(default=None, converter=whole, validator=check_optional_str)

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


@final
@attrs.frozen(init=False)
class TurnStart:
    """A turn opens."""

    turn: int
    trigger: TurnTrigger
    type: ClassVar[str] = "turn/start"

    def __init__(self, turn: int, trigger: TurnTrigger) -> None:
        if type(turn) is not int or not NEG_SMALL_INT <= turn <= SMALL_INT:
            check_turn(self.type, turn)
        if type(trigger) is not TurnTrigger:
            raise wrong_type(self, "trigger", "a TurnTrigger", trigger)
        set_attribute(self, "turn", turn)
        set_attribute(self, "trigger", trigger)


@final
@attrs.frozen(init=False)
class TurnEnd:
    """A turn closes; the durable commit boundary."""

    turn: int
    reason: TurnEndReason
    type: ClassVar[str] = "turn/end"

    def __init__(self, turn: int, reason: TurnEndReason) -> None:
        if type(turn) is not int or not NEG_SMALL_INT <= turn <= SMALL_INT:
            check_turn(self.type, turn)
        if type(reason) is not TurnEndReason:
            raise wrong_type(self, "reason", "a TurnEndReason", reason)
        set_attribute(self, "turn", turn)
        set_attribute(self, "reason", reason)


def _turn_and_step_init(self: StepStart | StepEnd, turn: int, step: int) -> None:
    if not (
        type(turn) is int
        and type(step) is int
        and NEG_SMALL_INT <= turn <= SMALL_INT >= step >= NEG_SMALL_INT
    ):
        check_turn_and_step(self.type, turn, step)
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
        blocks = event_content(self.type, content)
        for block in blocks:
            if type(block) is ToolResultBlock:  # the one block that nests others
                check_blocks(blocks, "user/message: content")
                break
        set_attribute(self, "content", blocks)
        set_attribute(self, "source", source)


@final
@attrs.frozen
class PromptBlocked:
    """The original content of a vetoed prompt."""

    content: tuple[ContentBlock, ...] = content_field()
    source: MessageSource = source_field()
    reason: str = attrs.field(default="", converter=whole, validator=check_str)
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
@attrs.frozen(init=False)
class AssistantMessage:
    """The assembled assistant message of a step."""

    turn: int
    step: int
    content: tuple[ContentBlock, ...]
    usage: Usage | None = None
    type: ClassVar[str] = "assistant/message"

    # Built every step: its checks sit inline in a hand-written __init__, in the
    # order attrs ran them (the content converted first).
    def __init__(self, turn: int, step: int, content: Any, usage: Usage | None = None) -> None:
        blocks = event_content(self.type, content)
        if not (
            type(turn) is int
            and type(step) is int
            and NEG_SMALL_INT <= turn <= SMALL_INT >= step >= NEG_SMALL_INT
        ):
            check_turn_and_step(self.type, turn, step)
        for block in blocks:
            if type(block) is ToolResultBlock:
                check_blocks(blocks, "assistant/message: content")
                break
        if type(usage) is not Usage and usage is not None:
            raise wrong_type(self, "usage", "a Usage or None", usage)
        set_turn, set_step, set_content, set_usage = _SET_MESSAGE
        set_turn(self, turn)
        set_step(self, step)
        set_content(self, blocks)
        set_usage(self, usage)


_SET_MESSAGE = slot_setters(AssistantMessage, "turn", "step", "content", "usage")


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
        if not (
            type(turn) is int
            and type(step) is int
            and NEG_SMALL_INT <= turn <= SMALL_INT >= step >= NEG_SMALL_INT
        ):
            check_turn_and_step(self.type, turn, step)
        if type(call_id) is not str or type(name) is not str or type(arguments) is not str:
            call_id, name, arguments = _call_texts(call_id, name, arguments)
        set_turn, set_step, set_call_id, set_name, set_arguments = _SET_CALL
        set_turn(self, turn)
        set_step(self, step)
        # Joined as the call's block joins them (R1.6), whoever built this record.
        set_call_id(self, call_id if call_id.isascii() else joined_surrogates(call_id))
        set_name(self, name if name.isascii() else joined_surrogates(name))
        set_arguments(self, arguments if arguments.isascii() else joined_surrogates(arguments))


_SET_CALL = slot_setters(ToolCallEvent, "turn", "step", "call_id", "name", "arguments")


def _call_texts(call_id: object, name: object, arguments: object) -> tuple[str, str, str]:
    """The plain str of each of a ``tool/call``'s texts, one a str subclass at least.

    Raises:
        InvalidJsonError: one of them is no str.
    """
    if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str)):
        raise InvalidJsonError(
            "tool/call: call_id, name and arguments (the raw JSON text) must be strings, "
            f"got {shown(call_id)}, {shown(name)}, {shown(arguments)}"
        )
    return str.__str__(call_id), str.__str__(name), str.__str__(arguments)


@final
@attrs.frozen
class ToolErrorInfo:
    """A coded harness error attached to a tool result."""

    name: str = attrs.field(converter=whole, validator=check_str)
    code: str = attrs.field(converter=whole, validator=check_str)


@final
@attrs.frozen(init=False)
class ToolResultEvent:
    """The result of one tool call, keyed by the model's call id."""

    turn: int
    step: int
    call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    error: ToolErrorInfo | None = None
    meta: JsonValue = None
    type: ClassVar[str] = "tool/result"

    # Built for every tool call: its checks sit inline in a hand-written
    # __init__, in the order attrs ran them (content and meta converted first).
    def __init__(
        self,
        turn: int,
        step: int,
        call_id: str,
        content: Any,
        is_error: bool = False,  # noqa: FBT001, FBT002 - a field, positional as attrs made it
        error: ToolErrorInfo | None = None,
        meta: object = None,
    ) -> None:
        blocks = event_content(self.type, content)
        # Named by the path its errors start with, as the event's other fields are.
        frozen_meta = None if meta is None else freeze_json(meta, "tool/result: meta")
        if not (
            type(turn) is int
            and type(step) is int
            and NEG_SMALL_INT <= turn <= SMALL_INT >= step >= NEG_SMALL_INT
        ):
            check_turn_and_step(self.type, turn, step)
        for block in blocks:
            if type(block) is ToolResultBlock:
                check_blocks(blocks, "tool/result: content")
                break
        if type(is_error) is not bool:
            raise InvalidJsonError(f"tool/result: is_error must be a bool, got {shown(is_error)}")
        if type(call_id) is not str:
            call_id = plain_field(self, "call_id", call_id)
        if type(error) is not ToolErrorInfo and error is not None:
            raise wrong_type(self, "error", "a ToolErrorInfo or None", error)
        set_turn, set_step, set_call_id, set_content, set_is_error, set_error, set_meta = (
            _SET_RESULT
        )
        set_turn(self, turn)
        set_step(self, step)
        set_call_id(self, call_id if call_id.isascii() else joined_surrogates(call_id))
        set_content(self, blocks)
        set_is_error(self, is_error)
        set_error(self, error)
        set_meta(self, frozen_meta)


_SET_RESULT = slot_setters(
    ToolResultEvent, "turn", "step", "call_id", "content", "is_error", "error", "meta"
)
