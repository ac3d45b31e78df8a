"""Script steps for ScriptedModel: frozen values that pre-build their chunk streams."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal, NamedTuple, TypeAlias, final, get_args

import attrs

from retinue._content import (
    Reasoning,
    Text,
    ToolCall,
    check_optional_str,
    check_str,
    wrong_type,
)
from retinue._lossless import shown_short
from retinue._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    BlockEnd,
    BlockStart,
    Errored,
    Finish,
    FinishReason,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)

__all__ = [
    "CallTools",
    "CutAtMaxTokens",
    "FinishAborted",
    "FinishWithError",
    "Hang",
    "RaiseMidStream",
    "RawChunks",
    "Reply",
    "Step",
    "ToolCallSpec",
    "split_text",
]

Ending: TypeAlias = Literal["finish", "raise", "hang"]


def split_text(text: str, parts: int) -> list[str]:
    """Split *text* into ``min(parts, len(text))`` non-empty pieces (one piece if empty).

    Pieces are cut between code points, not grapheme clusters: an emoji sequence
    or a letter and its combining mark may span two pieces, as a provider's
    token stream may split them.
    """
    count = max(1, min(parts, len(text)))
    bounds = [round(i * len(text) / count) for i in range(count + 1)]
    return [text[bounds[i] : bounds[i + 1]] for i in range(count)]


def require_count(name: str, value: object, *, least: int = 1) -> None:
    """Refuse *value* unless it is an ``int`` (not a ``bool``) of at least *least*.

    Raises:
        TypeError: *value* is not an ``int``; the message names *name*.
        ValueError: *value* is below *least*; the message names *name*.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value!r}")


def _count(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    require_count(attribute.name, value)


def _count_from_zero(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    require_count(attribute.name, value, least=0)


def _seconds(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    # NaN compares false with everything, so a plain ``< 0`` test lets it
    # through and the stream then plays it as no delay at all.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{attribute.name} must be finite and >= 0, got {value!r}")


def _exception(_instance: object, attribute: attrs.Attribute[BaseException], value: object) -> None:
    if isinstance(value, StopIteration | StopAsyncIteration):
        # PEP 479 and PEP 525: raised inside the stream, either reaches its reader as
        # a RuntimeError, not as the error the script names.
        raise TypeError(
            f"{attribute.name} cannot be a {type(value).__name__}: a stream raising one "
            "raises RuntimeError instead; end a stream early with RawChunks and no Finish"
        )
    if isinstance(value, BaseException):
        return
    hint = ""
    if isinstance(value, type) and issubclass(value, BaseException):
        hint = f": create one, {value.__name__}(...)"
    raise TypeError(
        f"{attribute.name} must be an exception instance, got {shown_short(value)}{hint}"
    )


def _flag(instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    # A truthy str ("no") would be taken as yes.
    if not isinstance(value, bool):
        raise wrong_type(instance, attribute.name, "a bool", value)


def _usage(instance: object, attribute: attrs.Attribute[Usage | None], value: object) -> None:
    # Streamed as it is, a wrong value would end the turn blaming the model for a
    # malformed chunk, far from the step that holds it.
    if value is not None and not isinstance(value, Usage):
        raise wrong_type(instance, attribute.name, "a retinue.providers.Usage or None", value)


def _some_calls(
    _instance: object,
    attribute: attrs.Attribute[tuple[ToolCallSpec, ...]],
    value: tuple[ToolCallSpec, ...],
) -> None:
    if not value:
        raise ValueError(
            f"{attribute.name} must hold at least one call; "
            "stream a tool-calls finish without calls with RawChunks"
        )


def _json_text(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    # A dict here would otherwise fail far away, in the splitting of the text.
    if not isinstance(value, str):
        raise TypeError(
            f"{attribute.name} must be the raw JSON text (a str, say json.dumps(...)), "
            f"got a {type(value).__name__} ({shown_short(value)})"
        )


@final
@attrs.frozen
class ToolCallSpec:
    """One tool call a step asks for; ``arguments`` is raw JSON text.

    With ``id=None`` the model assigns ``call_<stream>_<k>``, with ``_`` added while
    another call of its step is given that id: unique per stream.
    """

    name: str = attrs.field(validator=check_str)
    arguments: str = attrs.field(default="{}", validator=_json_text)
    id: str | None = attrs.field(default=None, validator=check_optional_str)


class IdSlot(NamedTuple):
    """An id-less tool call of a plan, whose id is assigned per stream.

    The call's first delta (at ``delta_at``) and its block end (at
    ``end_at``, ``None`` when the call is left open) carry the id; they are
    kept here, so a stream rebuilds them without looking them up.
    """

    ordinal: int
    delta_at: int
    first_delta: ToolCallDelta
    end_at: int | None
    call: ToolCall


@final
@attrs.frozen
class Plan:
    """A step's pre-built chunks and how the stream ends after them.

    ``id_slots`` are its tool calls without an id, which each stream gives one
    that none of ``named_ids``, the ids its other calls are given, is.
    """

    chunks: tuple[StreamChunk, ...]
    ending: Ending = "finish"
    id_slots: tuple[IdSlot, ...] = ()
    error: BaseException | None = None
    named_ids: frozenset[str] = frozenset()


@attrs.define(eq=False)
class _Builder:
    """Accumulates the chunks of one stream the way a provider adapter emits them."""

    chunks: list[StreamChunk] = attrs.field(factory=list)
    id_slots: list[IdSlot] = attrs.field(factory=list)
    named_ids: set[str] = attrs.field(factory=set)
    index: int = 0
    calls: int = 0

    def reasoning(self, text: str) -> None:
        if not text:  # as for text: a delta holds at least one character
            return
        index = self._start(Reasoning.type)
        self.chunks.append(ReasoningDelta(index, text))
        self.chunks.append(BlockEnd(index, Reasoning(text)))

    def text(self, text: str, parts: int, *, close: bool = True) -> None:
        if not text:
            return
        index = self._start(Text.type)
        self.chunks.extend(TextDelta(index, piece) for piece in split_text(text, parts))
        if close:
            self.chunks.append(BlockEnd(index, Text(text)))

    def tool_call(self, spec: ToolCallSpec, parts: int, *, close: bool = True) -> None:
        index = self._start(ToolCall.type)
        ordinal, self.calls = self.calls, self.calls + 1
        delta_at = len(self.chunks)
        pieces = split_text(spec.arguments, parts)
        first_delta = ToolCallDelta(index, spec.id, pieces[0], name=spec.name)
        self.chunks.append(first_delta)
        self.chunks.extend(ToolCallDelta(index, None, piece) for piece in pieces[1:])
        call = ToolCall(spec.id or "", spec.name, spec.arguments)
        end_at = len(self.chunks) if close else None
        if close:
            self.chunks.append(BlockEnd(index, call))
        if spec.id is None:
            self.id_slots.append(IdSlot(ordinal, delta_at, first_delta, end_at, call))
        else:
            self.named_ids.add(spec.id)

    def end(self, usage: Usage | None, reason: FinishReason) -> None:
        if usage is not None:
            self.chunks.append(UsageChunk(usage))
        self.chunks.append(Finish(reason))

    def plan(self, ending: Ending = "finish", error: BaseException | None = None) -> Plan:
        named = frozenset(self.named_ids)
        return Plan(tuple(self.chunks), ending, tuple(self.id_slots), error, named)

    def _start(self, block_type: str) -> int:
        index, self.index = self.index, self.index + 1
        self.chunks.append(BlockStart(index, block_type))
        return index


def _specs(calls: Iterable[ToolCallSpec]) -> tuple[ToolCallSpec, ...]:
    if isinstance(calls, ToolCallSpec):
        raise TypeError(
            "tool calls are a list of ToolCallSpec, got a single ToolCallSpec: "
            f"wrap it, [{shown_short(calls)}]"
        )
    specs = tuple(calls)
    for index, spec in enumerate(specs):
        if not isinstance(spec, ToolCallSpec):
            raise TypeError(
                f"call {index} must be a ToolCallSpec, got a {type(spec).__name__} ({shown_short(spec)})"
            )
    return specs


def _stream(chunks: Iterable[StreamChunk]) -> tuple[StreamChunk, ...]:
    # Items are taken as they are (a test may stream a malformed one on purpose);
    # a lone chunk or a str as the whole argument is only ever a mistake.
    if isinstance(chunks, get_args(StreamChunk)):
        raise TypeError(
            "chunks are a list of stream chunks, got a single "
            f"{type(chunks).__name__}: wrap it, [{shown_short(chunks)}]"
        )
    if isinstance(chunks, str | bytes):
        raise TypeError(f"chunks are a list of stream chunks, got {shown_short(chunks)}")
    return tuple(chunks)


@final
@attrs.frozen
class Reply:
    """Answer with text streamed in ``chunks`` deltas, then finish ``stop``.

    A delta holds at least one character (a code point: an emoji sequence or a
    letter and its combining mark may span deltas, as in a provider's stream),
    so a text shorter than ``chunks`` streams in ``len(text)`` deltas. An empty text streams no block (an empty message that only carries usage).
    ``reasoning`` adds a reasoning block first (none when empty, as for the text). ``delay`` is virtual seconds
    before the first chunk; ``chunk_delay`` is slept before every chunk.
    Here and in every step, delays are finite numbers >= 0, chunk counts
    are ints >= 1, texts are ``str`` and ``usage`` is a ``Usage`` or ``None``:
    when the step is built, a value of another type is refused with
    ``TypeError``, and a number out of range (a negative or NaN delay, a count
    of 0) with ``ValueError``.
    """

    text: str = attrs.field(validator=check_str)
    chunks: int = attrs.field(default=1, kw_only=True, validator=_count)
    usage: Usage | None = attrs.field(default=None, kw_only=True, validator=_usage)
    reasoning: str | None = attrs.field(default=None, kw_only=True, validator=check_optional_str)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    chunk_delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    _plan: Plan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        builder = _Builder()
        if self.reasoning is not None:
            builder.reasoning(self.reasoning)
        builder.text(self.text, self.chunks)
        builder.end(self.usage, STOP)
        object.__setattr__(self, "_plan", builder.plan())


@final
@attrs.frozen
class CallTools:
    """Ask for one or several tool calls, then finish ``tool-calls``.

    ``calls`` must not be empty (:class:`RawChunks` streams a ``tool-calls``
    finish without calls). Each call's arguments are split across ``chunks_per_call`` deltas; ``text``
    (if any) streams first, in ``text_chunks`` deltas. A delta holds at least
    one character, so shorter arguments or text stream in ``len(...)`` deltas
    (empty arguments in one).
    """

    calls: tuple[ToolCallSpec, ...] = attrs.field(converter=_specs, validator=_some_calls)
    chunks_per_call: int = attrs.field(default=1, kw_only=True, validator=_count)
    text: str | None = attrs.field(default=None, kw_only=True, validator=check_optional_str)
    text_chunks: int = attrs.field(default=1, kw_only=True, validator=_count)
    usage: Usage | None = attrs.field(default=None, kw_only=True, validator=_usage)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    chunk_delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    _plan: Plan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        builder = _Builder()
        builder.text(self.text or "", self.text_chunks)
        for call in self.calls:
            builder.tool_call(call, self.chunks_per_call)
        builder.end(self.usage, TOOL_CALLS)
        object.__setattr__(self, "_plan", builder.plan())


@final
@attrs.frozen
class CutAtMaxTokens:
    """Stream text, then finish ``max-tokens``.

    ``tool_calls`` are streamed but never closed, as a cut-off call would be;
    give them truncated argument text to model a real truncation.
    """

    text: str = attrs.field(default="", validator=check_str)
    tool_calls: tuple[ToolCallSpec, ...] = attrs.field(default=(), converter=_specs, kw_only=True)
    chunks: int = attrs.field(default=1, kw_only=True, validator=_count)
    usage: Usage | None = attrs.field(default=None, kw_only=True, validator=_usage)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    chunk_delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    _plan: Plan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        builder = _Builder()
        builder.text(self.text, self.chunks)
        for call in self.tool_calls:
            builder.tool_call(call, self.chunks, close=False)
        builder.end(self.usage, MAX_TOKENS)
        object.__setattr__(self, "_plan", builder.plan())


@final
@attrs.frozen
class FinishWithError:
    """Optionally stream text, then end with ``finish{error}`` (R10.3)."""

    message: str = attrs.field(validator=check_str)
    code: str | None = attrs.field(default=None, validator=check_optional_str)
    text: str = attrs.field(default="", kw_only=True, validator=check_str)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    chunk_delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    _plan: Plan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        builder = _Builder()
        builder.text(self.text, 1)
        builder.end(None, Errored(self.message, self.code))
        object.__setattr__(self, "_plan", builder.plan())


@final
@attrs.frozen
class FinishAborted:
    """Optionally stream text, then end with ``finish{aborted}`` (R10.3)."""

    text: str = attrs.field(default="", kw_only=True, validator=check_str)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    chunk_delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    _plan: Plan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        builder = _Builder()
        builder.text(self.text, 1)
        builder.end(None, ABORTED)
        object.__setattr__(self, "_plan", builder.plan())


@final
@attrs.frozen
class RaiseMidStream:
    """Stream the first ``after_chunks`` chunks of a text reply, then raise ``error``.

    The reply is ``text`` in ``chunks`` deltas (``len(text)`` if fewer): block
    start, deltas, block end.
    The first play raises ``error`` itself; once it has been raised, each play
    raises a fresh copy: same type, args, attributes, notes and cause, no
    traceback. The copy is made without running an ``__init__`` written in
    Python, so an SDK error whose constructor wants more than its args is
    copied too. Only an error whose type cannot be created from its args
    (its ``__new__`` refuses them) is raised again as itself, its traceback
    cleared. A ``StopIteration`` or ``StopAsyncIteration`` is refused: raised
    in a stream, it reaches the reader as a ``RuntimeError``.
    """

    error: BaseException = attrs.field(validator=_exception)
    after_chunks: int = attrs.field(default=0, kw_only=True, validator=_count_from_zero)
    text: str = attrs.field(default="partial answer", kw_only=True, validator=check_str)
    chunks: int = attrs.field(default=4, kw_only=True, validator=_count)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    chunk_delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    _plan: Plan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        builder = _Builder()
        builder.text(self.text, self.chunks)
        if not 0 <= self.after_chunks <= len(builder.chunks):
            raise ValueError(
                f"after_chunks must be in 0..{len(builder.chunks)} for this text, "
                f"got {self.after_chunks}"
            )
        del builder.chunks[self.after_chunks :]
        object.__setattr__(self, "_plan", builder.plan("raise", self.error))


@final
@attrs.frozen
class Hang:
    """Stream ``text`` (if any, left unclosed), then wait until cancelled."""

    text: str = attrs.field(default="", validator=check_str)
    chunks: int = attrs.field(default=1, kw_only=True, validator=_count)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    chunk_delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    _plan: Plan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        builder = _Builder()
        builder.text(self.text, self.chunks, close=False)
        object.__setattr__(self, "_plan", builder.plan("hang"))


@final
@attrs.frozen
class RawChunks:
    """Stream exactly these chunks, for protocol edge cases; nothing is added.

    With ``hang`` the stream then stays open, yielding nothing, until it is
    closed or cancelled: a server that holds its connection after the last event.
    """

    chunks: tuple[StreamChunk, ...] = attrs.field(converter=_stream)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    chunk_delay: float = attrs.field(default=0.0, kw_only=True, validator=_seconds)
    hang: bool = attrs.field(default=False, kw_only=True, validator=_flag)
    _plan: Plan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_plan", Plan(self.chunks, "hang" if self.hang else "finish"))


Step: TypeAlias = (
    Reply
    | CallTools
    | CutAtMaxTokens
    | FinishWithError
    | FinishAborted
    | RaiseMidStream
    | Hang
    | RawChunks
)
"""One scripted model call: what a :class:`ScriptedModel` streams for one request."""


def plan_of(step: Step) -> Plan:
    """The pre-built plan of *step* (a ScriptedModel checked it is a step when it got it)."""
    return step._plan


def not_a_step(value: object) -> str:
    """Say that *value* is not a script step, naming its type and the types that are."""
    names = ", ".join(kind.__name__ for kind in get_args(Step))
    return f"got a {type(value).__name__} ({shown_short(value)}), not a script step ({names})"
