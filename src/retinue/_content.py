"""Content blocks and messages: the model-visible values (R1.1, R1.2)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeAlias, final, get_args

import attrs

from ._lossless import FrozenDict, freeze_json, joined_surrogates, shown
from ._slots import slot_setters

__all__ = [
    "ContentBlock",
    "Message",
    "OpaqueBlock",
    "Reasoning",
    "RedactedReasoning",
    "Role",
    "Text",
    "ToolCall",
    "ToolResultBlock",
    "as_content",
    "as_context",
    "as_prompt",
    "check_optional_str",
    "check_str",
    "content_text",
    "new_tool_call_id",
    "plain",
    "plain_field",
    "refuse_blocks",
    "says_nothing",
    "snapshot_messages",
    "whole",
    "wrong_type",
]

Role: TypeAlias = Literal["system", "user", "assistant"]
_ROLES: tuple[str, ...] = get_args(Role)
_ROLE_SET = frozenset(_ROLES)


# A block is logged and stored as it is built: a field of the wrong type would
# be written, then refused when the session is loaded again, so it is refused here.
def check_str(block: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: *value* must be a str (the stored format's string)."""
    if not isinstance(value, str):
        raise wrong_type(block, attribute.name, "a str", value)


def whole(value: object) -> object:
    """An attrs converter: a str as :func:`plain` has it, else *value* as it is, for the
    field's validator to refuse.

    Every str field that is logged takes it (or its test, inline, in a hand-written
    ``__init__``).
    """
    if type(value) is str:
        # The common case, without a call: a block is built per message.
        return value if value.isascii() else joined_surrogates(value)
    return plain(value) if isinstance(value, str) else value


def plain(text: str) -> str:
    """*text* as the plain str of its text, its surrogate pairs joined (R1.6).

    The log stores a string's text and loads it back as a plain str: a subclass (a
    ``StrEnum`` member) held as itself would be one value live and another reloaded,
    and its own ``__str__`` or ``==`` need not be its text's, which ``str.__str__``
    gives. Held as two code points, a pair is stored as two ``\\u`` escapes, which
    read back as its one character.
    """
    return joined_surrogates(text if type(text) is str else str.__str__(text))


def plain_field(owner: object, name: str, value: object) -> str:
    """*value*, given as *owner*'s field *name*, as the plain str of its text.

    Left unjoined, for the caller's own test of its pairs: a hand-written
    ``__init__`` meets an exact str first and a subclass here.

    Raises:
        TypeError: *value* is no str.
    """
    if not isinstance(value, str):
        raise wrong_type(owner, name, "a str", value)
    return str.__str__(value)


def check_optional_str(block: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: *value* must be a str or None (stored absent)."""
    if value is not None and not isinstance(value, str):
        raise wrong_type(block, attribute.name, "a str or None", value)


def wrong_type(instance: object, name: str, expected: str, value: object) -> TypeError:
    """The error for a field of the wrong type: it would be written, then not reload."""
    return TypeError(f"{type(instance).__name__}.{name} must be {expected}, got {shown(value)}")


@final
@attrs.frozen(init=False)
class Text:
    """A text block."""

    text: str = attrs.field(converter=whole, validator=check_str)
    type: ClassVar[str] = "text"

    # Written by hand, as attrs would (converted, then checked): a tool's text result
    # and a message's text are built every step, and the converter and the
    # validator would add a call each.
    def __init__(self, text: str) -> None:
        if type(text) is not str or not text.isascii():
            text = whole(text)  # type: ignore[assignment]
            # Unless attrs' validators are switched off, as its own constructor asks.
            if not isinstance(text, str) and not attrs.validators.get_disabled():
                raise wrong_type(self, "text", "a str", text)
        set_attribute(self, "text", text)


@final
@attrs.frozen
class Reasoning:
    """Model reasoning ("thinking"); ``signature`` is the provider's integrity token."""

    text: str = attrs.field(converter=whole, validator=check_str)
    signature: str | None = attrs.field(default=None, converter=whole, validator=check_optional_str)
    type: ClassVar[str] = "reasoning"


@final
@attrs.frozen
class RedactedReasoning:
    """Reasoning the provider returned encrypted; replayed verbatim."""

    data: str = attrs.field(converter=whole, validator=check_str)
    type: ClassVar[str] = "redacted-reasoning"


@final
@attrs.frozen(init=False)
class ToolCall:
    """A tool call; ``arguments`` is the raw JSON text exactly as the model produced it."""

    id: str
    name: str
    arguments: str
    type: ClassVar[str] = "tool-call"

    # Written by hand, as attrs would, with check_str's test and whole's inline:
    # built for every tool call a model makes, where a validator or converter per
    # field adds a call each.
    def __init__(self, id: str, name: str, arguments: str) -> None:  # noqa: A002 - the field's name
        if type(id) is not str:
            id = plain_field(self, "id", id)  # noqa: A001 - the field's name
        if type(name) is not str:
            name = plain_field(self, "name", name)
        if type(arguments) is not str:
            arguments = plain_field(self, "arguments", arguments)
        set_id, set_name, set_arguments = _SET_CALL
        # Joined as every logged str is (R1.6): an id held as a pair would reload as
        # its character, and a call of that character's id would then share it.
        set_id(self, id if id.isascii() else joined_surrogates(id))
        set_name(self, name if name.isascii() else joined_surrogates(name))
        set_arguments(self, arguments if arguments.isascii() else joined_surrogates(arguments))


_SET_CALL = slot_setters(ToolCall, "id", "name", "arguments")


def new_tool_call_id() -> str:
    """A fresh tool-call id, for a call a provider sent without one.

    Unique within any history (an index would repeat every step, and a
    provider refuses a transcript that reuses an id); only ASCII letters,
    digits and ``_``, which every provider accepts.
    """
    return f"call_{uuid.uuid4().hex[:24]}"


@final
@attrs.frozen(init=False)
class ToolResultBlock:
    """The result of one tool call, as it appears in model-visible history."""

    tool_call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    type: ClassVar[str] = "tool-result"

    # Written by hand, as attrs would, with the field checks inline: one is
    # built for every tool result a session logs, to project it into history.
    def __init__(
        self,
        tool_call_id: str,
        content: tuple[ContentBlock, ...],
        is_error: bool = False,  # noqa: FBT001, FBT002 - a field, positional as attrs made it
    ) -> None:
        if type(tool_call_id) is not str:
            tool_call_id = plain_field(self, "tool_call_id", tool_call_id)
        if type(content) is not tuple:
            raise _not_blocks(self, content)
        for item in content:
            if type(item) not in _BLOCK_TYPE_SET:
                raise _not_blocks(self, content)
        if type(is_error) is not bool:
            raise wrong_type(self, "is_error", "a bool", is_error)
        if not tool_call_id.isascii():
            tool_call_id = joined_surrogates(tool_call_id)  # as its call's id is
        set_tool_call_id, set_content, set_is_error = _SET_RESULT
        set_tool_call_id(self, tool_call_id)
        set_content(self, content)
        set_is_error(self, is_error)


_SET_RESULT = slot_setters(ToolResultBlock, "tool_call_id", "content", "is_error")


def _not_blocks(block: ToolResultBlock, content: object) -> TypeError:
    return wrong_type(block, "content", "a tuple of content blocks", content)


_KNOWN_KINDS = frozenset(
    cls.type for cls in (Text, Reasoning, RedactedReasoning, ToolCall, ToolResultBlock)
)


def _check_kind(_block: object, _attribute: object, kind: Any) -> None:
    # Stored as its data tagged ``"type": kind``: a known kind would reload as that block.
    if type(kind) is not str or kind in _KNOWN_KINDS:
        raise ValueError(
            f"{kind!r} cannot be an opaque block's kind: it must be a string that names "
            "no built-in block type"
        )


def _frozen_data(data: Any) -> Any:
    # Named as a field, so that a refusal from deep inside says it is this block's data.
    return freeze_json(data, "OpaqueBlock.data")


def _check_data(_block: object, _attribute: object, data: Any) -> None:
    # The stored object's "type" key holds the kind, so the data cannot have one.
    if not isinstance(data, dict) or "type" in data:
        raise ValueError(f"an opaque block's data must be an object without a 'type' key: {data!r}")


@final
@attrs.frozen
class OpaqueBlock:
    """A block of a kind retinue does not know; it passes through untouched (R1.1).

    Its kind is a string naming no built-in block type and its data an object
    without a ``type`` key, so that the stored block reloads as itself.
    """

    kind: str = attrs.field(converter=whole, validator=_check_kind)
    data: FrozenDict = attrs.field(converter=_frozen_data, validator=_check_data)
    type: ClassVar[str] = "opaque"


ContentBlock: TypeAlias = (
    Text | Reasoning | RedactedReasoning | ToolCall | ToolResultBlock | OpaqueBlock
)
"""One block of a message's content."""
_BLOCK_TYPES = (Text, Reasoning, RedactedReasoning, ToolCall, ToolResultBlock, OpaqueBlock)
_BLOCK_TYPE_SET = frozenset(_BLOCK_TYPES)


def as_content(content: str | ContentBlock | Sequence[ContentBlock]) -> tuple[ContentBlock, ...]:
    """Normalise a str, a block or a sequence of blocks to a tuple of blocks.

    Raises:
        TypeError: *content* is none of these (bytes are no sequence of blocks),
            an item is not a content block, or a block is an instance of a
            subclass of a block class (they are final).
    """
    if type(content) is tuple:
        # The common case (a value built by retinue): every block class is final,
        # so an exact type check is an isinstance check.
        for block in content:
            if type(block) not in _BLOCK_TYPE_SET:
                break
        else:
            return content
    if isinstance(content, str):
        return (Text(content),)
    if isinstance(content, _BLOCK_TYPES):
        if type(content) not in _BLOCK_TYPE_SET:
            raise _not_a_block(content, "content")
        return (content,)
    if type(content) is not list and not _is_block_sequence(content):
        # Refused before iterating: a dict would give its keys, bytes their ints.
        raise TypeError(
            "content must be a str, a content block or a sequence of content blocks, "
            f"got {type(content).__name__}"
        )
    blocks = tuple(content)
    for index, block in enumerate(blocks):
        if type(block) not in _BLOCK_TYPE_SET:
            raise _not_a_block(block, f"content[{index}]")
    return blocks


def as_prompt(content: str | ContentBlock | Sequence[ContentBlock]) -> tuple[ContentBlock, ...]:
    """:func:`as_context` for content an agent's verbs or a listener's rewrite give the model as
    the user's message (a prompt, steering or context), which must say something to it.

    Content of no block, or of nothing but text of only whitespace, would reach each
    provider differently (Anthropic refuses a blank text block, so retinue drops it, and
    sends a placeholder for a message left with none; OpenAI takes it), or as an empty
    ``<context>`` or ``<steering>`` envelope: it is refused at the call instead (a session
    logged before keeps loading and replaying).

    Raises:
        TypeError: as :func:`as_content`.
        ValueError: as :func:`as_context`, or the content says nothing (:func:`says_nothing`).
    """
    blocks = as_context(content)
    if says_nothing(blocks):
        held = "only text of whitespace" if blocks else "no block"
        raise ValueError(
            f"content holds {held}: a prompt, steering or context must say something to the model"
        )
    return blocks


def as_context(content: str | ContentBlock | Sequence[ContentBlock]) -> tuple[ContentBlock, ...]:
    """:func:`as_content` for content the model is shown as the user's, which holds no
    tool call and no tool result: a :class:`~retinue.HookContext`'s, which may say nothing
    (a decision takes such a context as none).

    A tool call is the model's, and a tool result answers a call of the step
    that made it, which the loop alone logs: taken into a prompt, either
    would be in every later request of the agent, each refused by the
    provider (Anthropic: a ``tool_use`` in a user turn, a ``tool_result``
    answering no call before it) or sent without it (OpenAI).

    Raises:
        TypeError: as :func:`as_content`.
        ValueError: a block is a tool call or a tool result.
    """
    return refuse_blocks(
        as_content(content),
        _NOT_IN_PROMPTS,
        "a prompt cannot hold: tool calls are the model's, and their results are logged "
        "by the agent that ran them",
    )


def says_nothing(blocks: Sequence[ContentBlock]) -> bool:
    """Whether *blocks* hold nothing but text of only whitespace, or no block at all.

    Only text can be blank: a block of another kind (an image) is something to show.
    """
    return all(type(block) is Text and _blank(block.text) for block in blocks)


def _blank(text: object) -> bool:
    # Typed object: a block built past its validator (a listener's, say) may hold no str,
    # which the JSON check of what holds it reports.
    return isinstance(text, str) and not text.strip()


def refuse_blocks(
    blocks: tuple[ContentBlock, ...],
    kinds: frozenset[type],
    why: str,
    owner: str | None = None,
) -> tuple[ContentBlock, ...]:
    """*blocks*, once none of them is of *kinds*.

    Raises:
        ValueError: naming the first such block by its place (in *owner*'s content,
            when given) and type, then *why* it cannot be there.
    """
    for index, block in enumerate(blocks):
        if type(block) in kinds:
            place = f"content[{index}]" if owner is None else f"{owner}'s content[{index}]"
            raise ValueError(f"{place} is a {block.type} block, which {why}")
    return blocks


_NOT_IN_PROMPTS = frozenset((ToolCall, ToolResultBlock))


def _not_a_block(value: object, where: str) -> TypeError:
    """The error for *value*, found at *where*, whose type is no block class.

    An instance of a runtime subclass of a (final) block class is refused too:
    the log stores a block by its type name and reloads it as the base class,
    and every later check of a block is exact, so taken here it would be
    logged and then fail the turn.
    """
    base = next((cls for cls in _BLOCK_TYPES if isinstance(value, cls)), None)
    if base is None:
        return TypeError(f"{where} is not a content block: {type(value).__name__}")
    return TypeError(
        f"{where} is an instance of {type(value).__qualname__}, a subclass of "
        f"{base.__name__}: block classes are final, build a {base.__name__}"
    )


def _is_block_sequence(content: object) -> bool:
    """Whether *content* may be walked as blocks in order: not a mapping, bytes or a set.

    An ordered iterable, a generator among them, is taken as the sequence it yields.
    """
    return isinstance(content, Iterable) and not isinstance(content, _NOT_BLOCK_SEQUENCES)


# Iterable, but not blocks in an order: keys, ints, or no order at all.
_NOT_BLOCK_SEQUENCES = (Mapping, bytes, bytearray, memoryview, set, frozenset)


@final
@attrs.frozen(init=False)
class Message:
    """One model-visible message: a role and an immutable tuple of blocks (R1.2).

    *role* is ``"system"``, ``"user"`` or ``"assistant"``. *content* is kept
    as given, not converted (messages are built per step from tuples of
    blocks), so give a tuple of content blocks; the messages an
    ``agent/session-prefix`` listener returns are copied with tuple contents
    where they are logged, and an item of a content that is no block fails that
    turn (an empty content is sent as it is).

    Raises:
        ValueError: *role* is a str naming no role.
        TypeError: *role* is no str.
    """

    role: Role
    content: tuple[ContentBlock, ...]

    # Written by hand, as attrs would, with the role check inline: a message is
    # built several times a step, and a validator would add a call each time.
    def __init__(self, role: Role, content: tuple[ContentBlock, ...]) -> None:
        # A message prefix is logged in a request header: a role outside the
        # Literal would be written, then refused on load. The exact type test
        # first: an unhashable role is refused, not looked up.
        if type(role) is not str or role not in _ROLE_SET:
            role = _role(role)
        set_attribute(self, "role", role)
        set_attribute(self, "content", content)


# Binding costs about what one more call of the unbound function does: a class
# of two fields sets them unbound; one of three or more built every step uses
# its slots' setters (slot_setters).
set_attribute = object.__setattr__


def _role(role: object) -> Role:
    """*role*, a str subclass naming a role, as that role's plain str; else refused."""
    text = str.__str__(role) if isinstance(role, str) else role
    if type(text) is not str or text not in _ROLE_SET:
        raise _bad_role(role)
    return text  # type: ignore[return-value]


def _bad_role(role: object) -> Exception:
    expected = "one of " + ", ".join(map(repr, _ROLES))
    message = f"Message.role must be {expected}, got {shown(role)}"
    return ValueError(message) if isinstance(role, str) else TypeError(message)


def snapshot_messages(messages: Iterable[Message]) -> tuple[Message, ...]:
    """*messages* as a tuple whose every content is a tuple of blocks (R4.7).

    Raises:
        TypeError: an item is not a :class:`Message`, or its content holds a non-block.
    """
    snapshot = []
    for message in messages:
        if not isinstance(message, Message):
            raise TypeError(f"expected a Message, got {type(message).__name__}")
        content = as_content(message.content)
        snapshot.append(message if content is message.content else Message(message.role, content))
    return tuple(snapshot)


def content_text(content: Sequence[ContentBlock]) -> str:
    """Concatenate the text blocks of *content*."""
    # A loop, not a generator for join: this runs every step, on one or two blocks.
    text = ""
    for block in content:
        if type(block) is Text:  # final: an exact type test is an isinstance test
            text += block.text
    return text
