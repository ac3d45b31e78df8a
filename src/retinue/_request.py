"""Request values: call config, tool schemas and the immutable model request (R7.35, R8.2)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import final, overload

import attrs

from ._content import Message, check_optional_str, check_str, plain, whole
from ._errors import ConfigError, InvalidJsonError
from ._lossless import (
    FrozenDict,
    freeze_json,
    is_finite_number,
    shown,
    shown_short,
    writable_int,
)
from ._slots import slot_setters

__all__ = [
    "LlmCallConfig",
    "MessageHistory",
    "ModelRequest",
    "ToolSchema",
    "derived_of",
    "messages_since",
    "stop_tuple",
]


def _freeze_schema(value: object) -> FrozenDict:
    frozen = freeze_json(value, "parameters")
    if not isinstance(frozen, FrozenDict):
        raise TypeError("a tool's parameters must be a JSON object")
    return frozen


def stop_tuple(value: list[str] | tuple[str, ...] | None) -> tuple[str, ...] | None:
    """Freeze stop sequences; a bare string is refused, not split into characters.

    Typed as a list or tuple, not ``Sequence[str]``: a ``str`` is a
    ``Sequence[str]``, so ``stop="END"`` would pass a type checker and fail
    only at run time. Any other sequence of strings is still accepted.

    Raises:
        ConfigError: *value* is a string, not a sequence, or holds a non-string
            or empty item (an adapter would send it or the API would refuse it).
    """
    given: object = value  # a value built in Python may be anything
    if given is None:
        return None
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise ConfigError(f"stop must be a sequence of strings, got {shown_short(value)}")
    items = tuple(given)
    for index, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise ConfigError(
                f"stop must be a sequence of strings, got {shown_short(value)}: "
                f"item {index} is {shown_short(item)}, not a non-empty string"
            )
    # Logged in every request header: each pair joined as a block's text is (R1.6).
    return tuple([plain(item) for item in items])


# A config is logged in every request header, so its numbers must be JSON
# numbers that reload as themselves (R4.5, R1.6). Exact type checks, because
# ``bool`` is an ``int``.


def _check_temperature(_instance: object, _attribute: object, value: float | None) -> None:
    if value is not None and not is_finite_number(value):
        raise InvalidJsonError(f"temperature must be a finite number, got {shown(value)}")


def _check_max_tokens(_instance: object, _attribute: object, value: int | None) -> None:
    if value is not None and (type(value) is not int or not writable_int(value)):
        raise InvalidJsonError(f"max_tokens must be an integer JSON can write, got {shown(value)}")


@final
@attrs.frozen
class LlmCallConfig:
    """What model to call and how (R8.2); equality is field-wise."""

    model: str = attrs.field(converter=whole, validator=check_str)
    provider: str | None = attrs.field(default=None, converter=whole, validator=check_optional_str)
    temperature: float | None = attrs.field(default=None, validator=_check_temperature)
    max_tokens: int | None = attrs.field(default=None, validator=_check_max_tokens)
    stop: tuple[str, ...] | None = attrs.field(default=None, converter=stop_tuple)


@final
@attrs.frozen
class ToolSchema:
    """The part of a tool the model sees."""

    name: str = attrs.field(converter=whole, validator=check_str)
    description: str = attrs.field(converter=whole, validator=check_str)
    parameters: FrozenDict = attrs.field(converter=_freeze_schema)


@final
class MessageHistory(Sequence[Message]):
    """An immutable view of model-visible messages: a prefix plus a log snapshot.

    Taking one is O(1): it shares the session's append-only projection list and
    remembers its length, so later appends are invisible to it.
    """

    __slots__ = ("_derived", "_items", "_length", "_prefix")

    def __init__(
        self,
        items: Sequence[Message] = (),
        length: int | None = None,
        prefix: tuple[Message, ...] = (),
        *,
        derived: dict[object, object] | None = None,
    ) -> None:
        self._items = items
        self._length = len(items) if length is None else length
        self._prefix = prefix
        # What adapters derived from a prefix of the list, shared by every
        # view of it (see derived_of); a list that is not append-only has none.
        self._derived = derived

    def with_prefix(self, prefix: tuple[Message, ...]) -> MessageHistory:
        """Return this history with *prefix* in front (the session prefix, R8.6)."""
        return MessageHistory(
            self._items, self._length, prefix + self._prefix, derived=self._derived
        )

    def __len__(self) -> int:
        return len(self._prefix) + self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return tuple(self)[index]
        # Sized here: len(self) would be a second Python call for every index.
        prefix = self._prefix
        size = len(prefix) + self._length
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("message index out of range")
        if index < len(prefix):
            return prefix[index]
        return self._items[index - len(prefix)]

    def __iter__(self) -> Iterator[Message]:
        yield from self._prefix
        items = self._items
        for index in range(self._length):
            yield items[index]

    def __reversed__(self) -> Iterator[Message]:
        # Not Sequence's, which indexes this view once per message: a model
        # double walks back from the newest message on every call. Built of C
        # iterators, not a generator, as such a walk stops early: a generator
        # left unfinished is closed by raising GeneratorExit into it.
        newest_first = map(self._items.__getitem__, range(self._length - 1, -1, -1))
        return itertools.chain(newest_first, reversed(self._prefix))

    def since(self, start: int) -> Iterator[Message]:
        """The messages from index *start* on (0 <= *start*), without walking those before it."""
        prefix = self._prefix
        later = map(self._items.__getitem__, range(max(start - len(prefix), 0), self._length))
        return itertools.chain(prefix[start:], later)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"MessageHistory({list(self)!r})"


def derived_of(
    messages: Sequence[Message],
) -> tuple[tuple[Message, ...], dict[object, object]] | None:
    """The prefix of *messages* and the store of what was derived from its list, if it has one.

    A session's snapshots share their append-only list and one dict beside it:
    an adapter that maps a history may keep there, under a key of its own, what
    the list's first messages mapped to, and build the next request on it. A
    replace starts a new list and a new dict. Only a snapshot of a session has
    one; any other sequence of messages is mapped whole every time.
    """
    if type(messages) is MessageHistory and messages._derived is not None:
        return messages._prefix, messages._derived
    return None


def messages_since(messages: Sequence[Message], start: int) -> Iterator[Message]:
    """The messages of *messages* from index *start* on."""
    if type(messages) is MessageHistory:
        return messages.since(start)
    return itertools.islice(messages, start, None)


_NO_METADATA = FrozenDict()


@final
@attrs.frozen(init=False)
class ModelRequest:
    """One immutable model request (R7.35); adapters read it and never change it."""

    config: LlmCallConfig
    messages: MessageHistory
    system: str | None = None
    tools: tuple[ToolSchema, ...] = ()
    session_id: str | None = None
    # Shared, not built per request: a FrozenDict refuses mutation.
    metadata: FrozenDict = attrs.field(default=_NO_METADATA)

    # Written by hand, as attrs would: one is built every step.
    def __init__(
        self,
        config: LlmCallConfig,
        messages: MessageHistory,
        system: str | None = None,
        tools: tuple[ToolSchema, ...] = (),
        session_id: str | None = None,
        metadata: FrozenDict = _NO_METADATA,
    ) -> None:
        set_config, set_messages, set_system, set_tools, set_session_id, set_metadata = _SET_REQUEST
        set_config(self, config)
        set_messages(self, messages)
        set_system(self, system)
        set_tools(self, tools)
        set_session_id(self, session_id)
        set_metadata(self, metadata)

    @property
    def model(self) -> str:
        """The model name."""
        return self.config.model

    @property
    def provider(self) -> str | None:
        """The provider name, when the config names one."""
        return self.config.provider

    @property
    def max_tokens(self) -> int | None:
        """The output-token limit, when set."""
        return self.config.max_tokens

    @property
    def temperature(self) -> float | None:
        """The sampling temperature, when set."""
        return self.config.temperature

    @property
    def stop(self) -> tuple[str, ...] | None:
        """Stop sequences, when set."""
        return self.config.stop


_SET_REQUEST = slot_setters(
    ModelRequest, "config", "messages", "system", "tools", "session_id", "metadata"
)
