"""Token counts read leniently from the providers' usage objects."""

from __future__ import annotations

__all__ = ["optional_count", "token_count", "uncached_input"]


def optional_count(value: object) -> int | None:
    """A token count read leniently: some servers send ``5.0`` or a negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return max(0, int(value))


def token_count(value: object) -> int:
    """:func:`optional_count`, with 0 for a missing or unreadable count."""
    return optional_count(value) or 0


def uncached_input(total: object, cached: int | None, written: int | None) -> int:
    """The input tokens neither read from nor written to the cache (OpenAI counts both in).

    Some servers report more cached tokens than prompt tokens; a negative
    count would fail Usage's validation after the whole answer streamed.
    """
    return max(0, token_count(total) - (cached or 0) - (written or 0))
