"""What a session id may be (R11.12): every store's rule, which the runtime and its
registrations check too, beside the stores in the layers below them."""

from __future__ import annotations

import unicodedata

__all__ = ["MAX_ID_LENGTH", "id_problem"]

MAX_ID_LENGTH = 512
_REFUSED_KINDS = {"Cc": "control", "Cs": "surrogate", "Cn": "unassigned"}
"""The Unicode categories no id may hold, by what a refusal calls them."""


def id_problem(session_id: str) -> str | None:
    """Why *session_id* cannot name a stored session (every store's rule), or ``None``."""
    if not session_id:
        return "is empty"
    if len(session_id) > MAX_ID_LENGTH:
        return f"is longer than {MAX_ID_LENGTH} characters"
    if session_id in {".", ".."}:
        return "is a relative path"
    for char in session_id:
        if char in "/\\":
            return "contains a path separator"
        kind = _REFUSED_KINDS.get(unicodedata.category(char))
        if kind is not None:
            return f"contains the {kind} character U+{ord(char):04X}"
    return None
