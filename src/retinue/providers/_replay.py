"""Request-side replay of a session's history: ids, text, arguments and reasoning items."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from typing import final

from retinue._content import (
    ContentBlock,
    Message,
    OpaqueBlock,
    Text,
    ToolResultBlock,
)
from retinue._errors import InvalidJsonError
from retinue._lossless import loads_finite, thaw_json
from retinue._request import ToolSchema

from ._failures import ProviderError

__all__ = [
    "EMPTY_ERROR_TEXT",
    "EMPTY_TURN_TEXT",
    "TEXT_BLOCK_SEPARATOR",
    "UNNAMED_TOOL",
    "ReplayIds",
    "arguments_object",
    "checked_tool_names",
    "joined_text",
    "opaque_part",
    "replay_arguments",
    "replay_input",
    "responses_reasoning_item",
    "user_run_items",
]

JsonObject = dict[str, object]

EMPTY_TURN_TEXT = "(empty message)"
"""Stands in for a user turn with nothing to send (an empty prompt): no API accepts none."""

EMPTY_ERROR_TEXT = "(the tool failed without a message)"
"""Stands in for the content of an error result with no text.

Anthropic refuses an error result with no content; the OpenAI APIs, which have
no error flag, would show the model an empty output, as if the tool had worked.
"""

UNNAMED_TOOL = "unnamed_tool"
"""Stands in for the name of a call the stream never named (R10.6 builds it as ``''``).

The APIs refuse a call with an empty name in the history, which would fail
every later request of the session.
"""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The tool names OpenAI and Anthropic accept (``Tool`` refuses any other)."""


def checked_tool_names(tools: Sequence[ToolSchema], api: str) -> Sequence[ToolSchema]:
    """*tools*, once each name is one the APIs accept.

    A request carrying another fails with a 400 that names the tool only by
    its place in the list; here it fails before it is sent, naming the tool.

    Raises:
        ProviderError: ``INVALID_REQUEST``, naming the first such tool.
    """
    for tool in tools:
        if _TOOL_NAME.fullmatch(tool.name) is None:
            raise ProviderError(
                f"tool name {tool.name!r} is refused by the {api} API, which accepts 1 to 64 "
                "ASCII letters, digits, '_' or '-'; the request was not sent",
                code="INVALID_REQUEST",
            )
    return tools


TEXT_BLOCK_SEPARATOR = "\n"
"""What separates a message's text blocks when the OpenAI APIs get them as one string.

Run together, blocks merge their words ("a.py" and "b.py" read "a.pyb.py").
A line break is what compatible servers (vLLM) put between text parts
themselves, so the model reads what it would read from parts.
"""


def user_run_items(
    run: Sequence[Message],
    tool_result: Callable[[ToolResultBlock], JsonObject],
    user_message: Callable[[Message], JsonObject | None],
) -> list[JsonObject]:
    """Consecutive user messages for the OpenAI APIs: every tool result first, then the rest.

    A message injected while a tool ran is logged before the tool's result,
    but nothing may come between an assistant's tool calls and the results
    that answer them. *user_message* maps a message's other content, or
    gives ``None`` when it has none to send.
    """
    items = [tool_result(b) for m in run for b in m.content if isinstance(b, ToolResultBlock)]
    items.extend(item for item in map(user_message, run) if item is not None)
    if not items:
        # An empty prompt: the API refuses a request with nothing to answer.
        items.append({"role": "user", "content": EMPTY_TURN_TEXT})
    return items


@final
class ReplayIds:
    """The ids the tool calls and results of one request are sent with: no two calls share one.

    A server that numbers each answer's calls from 0 gives calls of different
    turns one id, and the Messages and Responses APIs refuse a request in
    which two calls (or two results) share an id. *spelled* writes an id as
    the API allows; a call whose id, so written, another call of the request
    already took gets a numbered suffix, within *longest* characters. A
    result answers the latest call with its id: the one in the turn before
    it. Ids are taken in order of first appearance, so the same history
    always maps the same way.

    :meth:`rewind` gives back what was taken since a :meth:`checkpoint`, to
    map again the messages after it, which a later request may map
    differently; :meth:`settle` drops what could be given back.
    """

    def __init__(self, spelled: Callable[[str], str] = str, longest: int | None = None) -> None:
        self._spelled = spelled
        self._longest = longest
        # Each id as logged, to the id its latest call (or an unanswered result) is sent with.
        self._latest: dict[str, str] = {}
        self._taken: set[str] = set()
        # Since the last settle: each id as logged, what _latest held for it, and the id taken.
        self._unsettled: list[tuple[str, str | None, str]] = []

    @classmethod
    def within(cls, longest: int) -> ReplayIds:
        """Ids of at most *longest* characters: a longer one (another server's) is shortened
        to its start, ``_`` and 8 hex digits of a digest of the whole, which tell apart ids
        that start alike."""

        def shortened(call_id: str) -> str:
            if len(call_id) <= longest:
                return call_id
            digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            return f"{call_id[: longest - 9]}_{digest}"

        return cls(shortened, longest)

    def call(self, call_id: str) -> str:
        """The id a call is sent with: its own, unless another call took it."""
        return self._take(call_id, self._latest.get(call_id))

    def result(self, call_id: str) -> str:
        """The id a result is sent with: that of the latest call with *call_id*."""
        sent = self._latest.get(call_id)
        return self._take(call_id, None) if sent is None else sent

    def checkpoint(self) -> int:
        """A point :meth:`rewind` can go back to, until the next :meth:`settle`."""
        return len(self._unsettled)

    def rewind(self, checkpoint: int = 0) -> None:
        """Give back every id taken since *checkpoint* (since the last settle: 0), latest first."""
        unsettled = self._unsettled
        for call_id, previous, taken in reversed(unsettled[checkpoint:]):
            if previous is None:
                del self._latest[call_id]
            else:
                self._latest[call_id] = previous
            self._taken.discard(taken)
        del unsettled[checkpoint:]

    def settle(self) -> None:
        """Keep every id taken so far: no rewind goes back before here."""
        self._unsettled.clear()

    def _take(self, call_id: str, previous: str | None) -> str:
        sent = self._latest[call_id] = self._fresh(call_id)
        self._unsettled.append((call_id, previous, sent))
        return sent

    def _fresh(self, call_id: str) -> str:
        sent = base = self._spelled(call_id)
        suffix = 1
        while sent in self._taken:
            suffix += 1
            tail = f"_{suffix}"
            room = len(base) if self._longest is None else self._longest - len(tail)
            sent = base[:room] + tail
        self._taken.add(sent)
        return sent


def joined_text(content: Sequence[ContentBlock]) -> str:
    """The text blocks of *content* as one string, one block per line; empty blocks add nothing.

    One string, not a list of text parts, though the OpenAI APIs accept either:
    some compatible servers (DeepSeek, Groq) refuse a list, and would refuse
    every request of a session that logged a message of several blocks.
    """
    return TEXT_BLOCK_SEPARATOR.join(
        block.text for block in content if isinstance(block, Text) and block.text
    )


def opaque_part(block: OpaqueBlock) -> dict[str, object]:
    """A block retinue does not model, as the provider's JSON object: its data and its type."""
    data = thaw_json(block.data)
    return {**(data if isinstance(data, dict) else {}), "type": block.kind}


def arguments_object(arguments: str) -> dict[str, object] | None:
    """The JSON object a call's *arguments* text holds, or ``None`` if it holds none.

    Text that holds ``NaN``, ``Infinity`` or a number that overflows a float
    holds none: JSON cannot write it back.
    """
    try:
        value = loads_finite(arguments)
    except (ValueError, InvalidJsonError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# Every request replays every earlier call of the session: each one is parsed once,
# not once per step (the strings are the log's own, so the cache holds no copies).
@functools.lru_cache(maxsize=4096)
def replay_arguments(arguments: str) -> str:
    """A call's arguments as the OpenAI APIs get them back: the text, if it is a JSON object.

    Other text (a model's broken JSON, kept raw in the log by R9.6) goes back
    as ``{}``, as it must to Anthropic: compatible servers parse the text and
    would refuse every later request of the session.
    """
    return arguments if arguments_object(arguments) is not None else "{}"


# Parsed objects are copies, unlike replay_arguments' strings: only short
# arguments, the common case, are held; a long one is parsed per request.
_HELD_INPUT_LENGTH = 2048


@functools.lru_cache(maxsize=4096)
def _held_input(arguments: str) -> dict[str, object]:
    return arguments_object(arguments) or {}


def replay_input(arguments: str) -> dict[str, object]:
    """A call's arguments as Anthropic gets them back: the JSON object, ``{}`` for other text.

    The API needs an object, so a model's broken JSON goes back as ``{}``. A
    short call's object is parsed once and shared by every body that
    replays it: nothing writes into a body once it is built.
    """
    if len(arguments) <= _HELD_INPUT_LENGTH:
        return _held_input(arguments)
    return arguments_object(arguments) or {}


def responses_reasoning_item(
    signature: str | None,
) -> tuple[dict[str, object], dict[str, str]] | None:
    """The Responses API reasoning item a reasoning block's *signature* holds, with the
    item ids of the function calls that followed it (by call id); ``None`` for another.

    The Responses adapter signs the reasoning it decodes with the item the API
    returned (its id, summary and ``encrypted_content``) as a line of JSON, and
    adds a line ``{"call_id": ..., "id": ...}`` for each call that followed it,
    to send them back together. No Anthropic signature (base64) starts with
    ``{``: only such a signature is parsed.
    """
    if not signature or not signature.startswith("{"):
        return None
    try:
        # Finite numbers only: a stored log is read back, and NaN would make the
        # SDK refuse the whole request body on every step of the turn.
        item, *links = map(loads_finite, signature.split("\n"))
    except (ValueError, InvalidJsonError, RecursionError):
        return None
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return None
    if not isinstance(item.get("id"), str) or not item["id"]:
        return None
    calls: dict[str, str] = {}
    for link in links:
        if not isinstance(link, dict):
            continue
        call_id, item_id = link.get("call_id"), link.get("id")
        if isinstance(call_id, str) and call_id and isinstance(item_id, str) and item_id:
            calls[call_id] = item_id
    if len(set(calls.values())) < len(calls):
        return None  # two calls cannot be one item: the API would refuse the request
    # Only the fields of a reasoning item go back, whatever else a stored log holds.
    return {k: v for k, v in item.items() if k in _REASONING_ITEM_FIELDS}, calls


_REASONING_ITEM_FIELDS = frozenset(
    {"type", "id", "summary", "content", "encrypted_content", "status"}
)
