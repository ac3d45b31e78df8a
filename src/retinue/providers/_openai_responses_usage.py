"""A Responses response's usage, and the finish of one cut short (pure)."""

from __future__ import annotations

from retinue._stream import MAX_TOKENS, Errored, FinishReason, Usage, finish_named

from ._counts import optional_count, token_count, uncached_input

__all__ = ["incomplete_reason", "responses_usage"]


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def responses_usage(usage: dict[str, object]) -> Usage:
    """Map a Responses ``usage`` object to :class:`Usage` counts, the input ones disjoint
    (reasoning stays within the output, as the API counts it)."""
    input_details = _dict(usage.get("input_tokens_details"))
    output_details = _dict(usage.get("output_tokens_details"))
    cached = optional_count(input_details.get("cached_tokens"))
    written = optional_count(input_details.get("cache_write_tokens"))
    return Usage(
        input_tokens=uncached_input(usage.get("input_tokens"), cached, written),
        output_tokens=token_count(usage.get("output_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=optional_count(output_details.get("reasoning_tokens")),
    )


def incomplete_reason(reason: str) -> FinishReason:
    """The finish of a response cut short for *reason* (``incomplete`` when none was given).

    Only the token limit is a max-tokens cut: the loop drops that answer's
    calls. Another reason (a message limit, a steer) finishes with its name,
    as an unknown Chat Completions ``finish_reason`` does.
    """
    if reason == "max_output_tokens":
        return MAX_TOKENS
    if reason == "content_filter":
        return Errored("the provider's content filter stopped the output", code="content_filter")
    return finish_named(reason)
