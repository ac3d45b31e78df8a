"""Session id validation and the traversal-safe file names of the JSONL layout (R11.12)."""

from __future__ import annotations

import hashlib

from retinue._errors import StoreError
from retinue._lossless import shown_short
from retinue._session_ids import id_problem

__all__ = ["bucket_name", "check_session_id", "escape_id", "file_stem", "unescape_id"]

# File names are limited to 255 bytes; a stem leaves room for a suffix and a temporary prefix.
MAX_STEM_LENGTH = 200
_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def check_session_id(session_id: object) -> str:
    """Return *session_id* if a store may hold it, else raise ``StoreError(INVALID_SESSION_ID)``.

    Refused: non-strings, the empty string, ids longer than 512 characters, path
    separators, ``.``/``..``, and control, surrogate or unassigned characters.
    """
    if not isinstance(session_id, str):
        raise StoreError(
            f"session id {shown_short(session_id)} is not a string", code="INVALID_SESSION_ID"
        )
    problem = id_problem(session_id)
    if problem is not None:
        raise StoreError(
            f"session id {shown_short(session_id)} {problem}", code="INVALID_SESSION_ID"
        )
    return session_id


def escape_id(session_id: str) -> str:
    """Escape an id into a file name (R11.12): keep ``[A-Za-z0-9._-]``, ``~XXXX`` the rest.

    Every other UTF-16 code unit (and ``~`` itself) becomes ``~`` plus four hex
    digits; ``.`` and ``..`` are escaped in full. The mapping is injective.
    """
    if session_id in {".", ".."}:
        return "".join(f"~{ord(char):04x}" for char in session_id)
    out: list[str] = []
    for char in session_id:
        if char in _KEEP:
            out.append(char)
            continue
        units = char.encode("utf-16-be", "surrogatepass")
        out.extend(
            f"~{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2)
        )
    return "".join(out)


def file_stem(session_id: str) -> str:
    """A session's file name without extension: its escaped id (R11.12), or, when that
    would not fit a file name, the escaped id's start, ``~~`` and a sha256 of the id.

    ``~~`` never occurs in an escaped id, so the two forms cannot collide.
    """
    name = escape_id(session_id)
    if len(name) <= MAX_STEM_LENGTH:
        return name
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{name[:120]}~~{digest}"


def unescape_id(name: str) -> str:
    """Invert :func:`escape_id`; raises ``ValueError`` on a malformed name."""
    units = bytearray()
    index = 0
    while index < len(name):
        char = name[index]
        if char == "~":
            units += int(name[index + 1 : index + 5], 16).to_bytes(2, "big")
            index += 5
        else:
            units += char.encode("utf-16-be")
            index += 1
    return units.decode("utf-16-be", "surrogatepass")


def bucket_name(cwd: str | None) -> str:
    """The JSONL bucket directory of a session: ``cwd-<12 hex of sha256(cwd)>`` or ``_no-cwd``."""
    if cwd is None:
        return "_no-cwd"
    return "cwd-" + hashlib.sha256(cwd.encode("utf-8", "surrogatepass")).hexdigest()[:12]
