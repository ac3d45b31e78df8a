"""Model stream values: chunks, finish reasons and token usage (R10.1, R10.4, R10.5)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeAlias, final

import attrs

from ._content import ContentBlock, set_attribute, whole
from ._errors import InvalidJsonError
from ._lossless import is_count, shown
from ._slots import slot_setters

__all__ = [
    "Aborted",
    "BlockEnd",
    "BlockStart",
    "Errored",
    "Finish",
    "FinishReason",
    "MaxTokens",
    "OtherFinish",
    "ReasoningDelta",
    "Stop",
    "StreamChunk",
    "TextDelta",
    "ToolCallDelta",
    "ToolCalls",
    "Usage",
    "UsageChunk",
    "count_validator",
    "finish_named",
]


def count_validator(prefix: str = "") -> Callable[[object, attrs.Attribute[Any], object], None]:
    """An attrs validator of a non-negative exact int (``None`` where that is the default).

    The int must also be short enough for JSON to write (``sys.get_int_max_str_digits()``).
    *prefix* goes before the field's name in the error, e.g. ``"usage."``.
    """

    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None and attribute.default is None:
            return
        if not is_count(value):
            raise InvalidJsonError(
                f"{prefix}{attribute.name} must be a non-negative integer JSON can write, "
                f"got {shown(value)}"
            )

    return check


_count = count_validator("usage.")


@final
@attrs.frozen
class Usage:
    """Token counts of one call.

    The input counts are disjoint: ``input_tokens`` excludes the cached input
    (``cache_read_tokens``) and the input written to the cache
    (``cache_write_tokens``), so the prompt is the sum of the three.
    ``reasoning_tokens`` is not disjoint from the output: it is the part of
    ``output_tokens`` spent reasoning, as every API reports it (an answer of 300
    output tokens, 250 of them reasoning, has ``output_tokens`` 300 and
    ``reasoning_tokens`` 250).
    """

    input_tokens: int = attrs.field(default=0, validator=_count)
    output_tokens: int = attrs.field(default=0, validator=_count)
    cache_read_tokens: int | None = attrs.field(default=None, validator=_count)
    cache_write_tokens: int | None = attrs.field(default=None, validator=_count)
    reasoning_tokens: int | None = attrs.field(default=None, validator=_count)

    @property
    def total_tokens(self) -> int:
        """Billed input plus output tokens."""
        return (
            self.input_tokens
            + self.output_tokens
            + (self.cache_read_tokens or 0)
            + (self.cache_write_tokens or 0)
        )


@final
@attrs.frozen
class Stop:
    """The model finished normally."""

    kind: ClassVar[str] = "stop"


@final
@attrs.frozen
class ToolCalls:
    """The model finished to have tools run."""

    kind: ClassVar[str] = "tool-calls"


@final
@attrs.frozen
class MaxTokens:
    """The output was cut at the token limit."""

    kind: ClassVar[str] = "max-tokens"


@final
@attrs.frozen
class Aborted:
    """The stream was aborted by the provider or the transport."""

    kind: ClassVar[str] = "aborted"


@final
@attrs.frozen
class Errored:
    """The provider reported an error inside the stream."""

    # A provider's words, logged in the stream's finish: each joined as a block's text is (R1.6).
    message: str = attrs.field(converter=whole)
    code: str | None = attrs.field(default=None, converter=whole)
    kind: ClassVar[str] = "error"


def _unknown_kind(_instance: object, _attribute: attrs.Attribute[str], name: str) -> None:
    if name in _KNOWN_KINDS or name == Errored.kind:
        raise ValueError(
            f"{name!r} cannot name an unknown finish: a stored finish is read back by its kind"
        )


@final
@attrs.frozen
class OtherFinish:
    """A finish kind retinue does not know; treated as success (R10.4).

    Its name is never one of retinue's own kinds: :func:`finish_named` maps
    a provider's name to the reason it means.
    """

    name: str = attrs.field(converter=whole, validator=_unknown_kind)

    @property
    def kind(self) -> str:
        """The provider's finish name."""
        return self.name


FinishReason: TypeAlias = Stop | ToolCalls | MaxTokens | Aborted | Errored | OtherFinish
"""How a model's answer ended, as its stream's :class:`Finish` says."""
STOP = Stop()
TOOL_CALLS = ToolCalls()
MAX_TOKENS = MaxTokens()
ABORTED = Aborted()
_KNOWN_KINDS: dict[str, FinishReason] = {
    reason.kind: reason for reason in (STOP, TOOL_CALLS, MAX_TOKENS, ABORTED)
}


def finish_named(name: str) -> FinishReason:
    """The reason a finish *name* from a provider means.

    One of retinue's own kinds when it is that kind's name (``error`` without a
    message becomes an :class:`Errored` saying so), else an :class:`OtherFinish`.
    """
    known = _KNOWN_KINDS.get(name)
    if known is not None:
        return known
    if name == Errored.kind:
        return Errored(f"the provider finished the stream with {name!r}")
    return OtherFinish(name)


@final
@attrs.frozen
class BlockStart:
    """A content block opens at ``index``."""

    index: int
    block_type: str = attrs.field(converter=whole)
    type: ClassVar[str] = "block-start"


# The deltas are built for every stream chunk: their strings are joined by ``whole``
# (R1.6), called only past its ASCII test, inline in a hand-written __init__ (a
# converter per field would add a call each). A pair held as two code points would
# be logged as such and stored as two escapes, which read back as its one character.
# Whatever is not a str is kept as given, for the check of a logged chunk to refuse.


@final
@attrs.frozen(init=False)
class TextDelta:
    """More text for the block at ``index``."""

    index: int
    text: str
    type: ClassVar[str] = "text-delta"

    def __init__(self, index: int, text: str) -> None:
        set_attribute(self, "index", index)
        set_attribute(self, "text", text if type(text) is str and text.isascii() else whole(text))


@final
@attrs.frozen(init=False)
class ReasoningDelta:
    """More reasoning text (or a signature fragment) for the block at ``index``."""

    index: int
    text: str
    signature: str | None = None
    type: ClassVar[str] = "reasoning-delta"

    def __init__(self, index: int, text: str, signature: str | None = None) -> None:
        set_index, set_text, set_signature = _SET_REASONING_DELTA
        set_index(self, index)
        set_text(self, text if type(text) is str and text.isascii() else whole(text))
        set_signature(
            self,
            signature
            if signature is None or (type(signature) is str and signature.isascii())
            else whole(signature),
        )


_SET_REASONING_DELTA = slot_setters(ReasoningDelta, "index", "text", "signature")


@final
@attrs.frozen(init=False)
class ToolCallDelta:
    """A tool-call fragment: id and name when known, and raw argument text."""

    index: int
    id: str | None
    arguments_delta: str
    name: str | None = None
    type: ClassVar[str] = "tool-call-delta"

    def __init__(
        self,
        index: int,
        id: str | None,  # noqa: A002 - the field's name
        arguments_delta: str,
        name: str | None = None,
    ) -> None:
        set_index, set_id, set_arguments_delta, set_name = _SET_CALL_DELTA
        set_index(self, index)
        set_id(self, id if id is None or (type(id) is str and id.isascii()) else whole(id))
        set_arguments_delta(
            self,
            arguments_delta
            if type(arguments_delta) is str and arguments_delta.isascii()
            else whole(arguments_delta),
        )
        set_name(
            self, name if name is None or (type(name) is str and name.isascii()) else whole(name)
        )


_SET_CALL_DELTA = slot_setters(ToolCallDelta, "index", "id", "arguments_delta", "name")


@final
@attrs.frozen
class BlockEnd:
    """The authoritative assembled block for ``index``."""

    index: int
    block: ContentBlock
    type: ClassVar[str] = "block-end"


@final
@attrs.frozen
class UsageChunk:
    """Token usage for the call; comes before ``Finish``."""

    usage: Usage
    type: ClassVar[str] = "usage"


@final
@attrs.frozen
class Finish:
    """The last chunk of a stream."""

    reason: FinishReason
    type: ClassVar[str] = "finish"


StreamChunk: TypeAlias = (
    BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | Finish
)
"""One item of a model's stream, in order: what a :class:`Model` yields."""
