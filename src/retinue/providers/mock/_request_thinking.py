"""Extended thinking beside a tool loop begun without it, refused as the Messages API refuses it.

A tool loop is one assistant turn and keeps the thinking setting it began
with: with ``thinking`` on, the API refuses a request whose history ends on
tool results within an assistant turn whose first message does not start
with a ``thinking`` or ``redacted_thinking`` block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._render import error_body
from ._values import Api

__all__ = ["thinking_refusal"]

_NOT_THINKING = (
    # sic: the API's own spelling
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
    "disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
_THINKING_BLOCKS = ("thinking", "redacted_thinking")


def thinking_refusal(api: Api, body: Mapping[str, object]) -> bytes | None:
    """The 400 error body the Messages API answers *body* with when thinking is on and
    the assistant turn its trailing tool results are part of (the assistant messages
    since the last user message holding more than tool results) did not start with
    thinking; ``None`` otherwise (and for the other APIs).

    A turn thinks only before its first tool call: its later assistant messages
    need not start with thinking. *body*'s fields have the types the mock reads
    (refused before otherwise).
    """
    thinking = body.get("thinking")
    if api != "messages" or not isinstance(thinking, dict) or thinking.get("type") == "disabled":
        return None
    messages: Sequence[Mapping[str, object]] = body.get("messages") or []  # type: ignore[assignment]
    index, results = len(messages) - 1, False
    while index >= 0 and messages[index].get("role") == "user":
        results = results or _holds_results(messages[index])
        index -= 1  # consecutive user messages make one turn
    first = None
    while results and index >= 0:
        message = messages[index]
        if message.get("role") == "assistant":
            first = index
        elif not _holds_results(message):
            break  # a prompt: the turn began after it
        index -= 1
    if first is None:
        return None
    found = _first_block_type(messages[first].get("content"))
    if found in _THINKING_BLOCKS:
        return None
    return error_body("messages", 400, _NOT_THINKING.format(index=first, found=found))


def _holds_results(message: Mapping[str, object]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )


def _first_block_type(content: object) -> object:
    """The type of *content*'s first block: a string is one text block."""
    if isinstance(content, str):
        return "text"
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return content[0].get("type")
    return None
