"""A guard source, a noting tool, prefix messages and request texts, for the interception tests."""

from __future__ import annotations

from collections.abc import Sequence

import trio

import retinue
from retinue import Message, MessageSource, Text
from tests.helpers import texts

GUARD = MessageSource("plugin", "guard")


def request_texts(messages: Sequence[Message]) -> list[str]:
    """The text of every message of a request."""
    return [texts(message.content) for message in messages]


@retinue.tool(parallel_safe=True)
async def note(text: str) -> str:
    """Return a note after a while.

    Args:
        text: The note.
    """
    await trio.sleep(1)
    return f"noted {text}"


def prefix_message(text: str) -> Message:
    return Message("user", (Text(text),))
