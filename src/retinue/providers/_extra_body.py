"""``extra_body``: request fields an adapter has no setting for, merged into every body it sends."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from retinue._lossless import FrozenDict, freeze_json, thaw_json

__all__ = [
    "ANTHROPIC_BUILT",
    "CHAT_BUILT",
    "RESPONSES_BUILT",
    "TOOLS_ONLY",
    "frozen_extra_body",
    "merge_extra_body",
]

CHAT_BUILT = (
    "model",
    "messages",
    "tools",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "stop",
    # Only the first choice is read: the others would be billed and dropped.
    "n",
)
"""The Chat Completions fields the adapter builds from each request (or reads one of)."""
RESPONSES_BUILT = (
    "model",
    "input",
    "instructions",
    "tools",
    "stream",
    "max_output_tokens",
    "temperature",
    # Each would have the server add a stored history to the one the request sends.
    "previous_response_id",
    "conversation",
)
"""The Responses API fields the adapter builds from each request (or that would
change which history the request answers)."""
ANTHROPIC_BUILT = (
    "model",
    "messages",
    "system",
    "tools",
    "stream",
    "max_tokens",
    "temperature",
    "stop_sequences",
)
"""The Anthropic Messages fields the adapter builds from each request; ``thinking``
too when it has a ``thinking_budget``."""


def frozen_extra_body(
    extra_body: object, built: Collection[str], adapter: str
) -> FrozenDict | None:
    """*extra_body* checked as lossless JSON and frozen, so a later change to the
    caller's mapping changes no request; ``None`` for ``None`` or an empty mapping.

    Raises:
        TypeError: *extra_body* is no mapping, or holds a key that is no str or
            a value that is no lossless JSON (``InvalidJsonError``, naming its path
            from ``extra_body``).
        ValueError: a key is one of *built*, the fields *adapter* builds itself
            for each request: set there, it would replace the transcript or a
            setting the agent gives.
    """
    if extra_body is None:
        return None
    if not isinstance(extra_body, Mapping):
        raise TypeError(
            f"extra_body must be a mapping of str to JSON values, not {type(extra_body).__name__}"
        )
    frozen = freeze_json(extra_body, "extra_body")
    assert isinstance(frozen, FrozenDict)
    taken = [key for key in frozen if key in built]
    if taken:
        raise ValueError(
            f"extra_body.{taken[0]}: {adapter} sets this field from each request and its "
            f"agent's options (or reads the answer it shapes), so extra_body may not set it "
            f"(nor any of: {', '.join(built)})"
        )
    return frozen or None


TOOLS_ONLY = frozenset({"tool_choice", "parallel_tool_calls"})
"""Fields the APIs take only beside ``tools``: a request without tools goes without them."""


def merge_extra_body(body: dict[str, object], extra_body: FrozenDict | None) -> None:
    """Merge a fresh copy of *extra_body*'s fields into the top level of *body*; one of
    :data:`TOOLS_ONLY` only if *body* has tools (the APIs refuse it otherwise)."""
    if extra_body:
        tools = "tools" in body
        body.update(
            (key, thaw_json(value))
            for key, value in extra_body.items()
            if tools or key not in TOOLS_ONLY
        )
