"""Helpers shared by the storage backends: header parsing and typed refusals."""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Iterable

from retinue._errors import CorruptSessionError, StoreError
from retinue.session import SessionHeader, load_header

__all__ = ["already_exists", "cannot_open", "parse_header", "parse_headers", "seq_conflict"]

log = logging.getLogger("retinue.stores")


def parse_header(text: str | bytes, session_id: str) -> SessionHeader:
    """Parse a stored header line; raise ``CorruptSessionError`` naming the session."""
    try:
        # Strictly UTF-8: json.loads would guess at bytes (UTF-16, surrogates).
        raw = json.loads(text.decode() if isinstance(text, bytes) else text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptSessionError(
            f"session {session_id!r}: the header is not valid UTF-8 JSON: {exc}",
            code="CORRUPT_HEADER",
        ) from exc
    except RecursionError:
        raise CorruptSessionError(
            f"session {session_id!r}: the header is nested too deeply to load",
            code="CORRUPT_HEADER",
        ) from None
    if not isinstance(raw, dict) or raw.get("type") != "session":
        raise CorruptSessionError(
            f"session {session_id!r}: the header is not a session header line",
            code="CORRUPT_HEADER",
        )
    try:
        return load_header(raw)
    except CorruptSessionError as exc:
        raise CorruptSessionError(
            f"session {session_id!r}: {exc.message}", code="CORRUPT_HEADER"
        ) from exc


def parse_headers(rows: Iterable[tuple[str, str | bytes]]) -> list[SessionHeader]:
    """Parse ``(id, header)`` rows, logging and skipping corrupt ones so listing keeps working."""
    headers: list[SessionHeader] = []
    for session_id, text in rows:
        try:
            headers.append(parse_header(text, session_id))
        except CorruptSessionError as exc:
            log.warning("skipping a session in the listing: %s", exc)
    return headers


def seq_conflict(session_id: str, stored: int, first: int) -> StoreError:
    """The refusal of an append that does not start at the stored next seq."""
    return StoreError(
        f"session {session_id!r}: the stored log has {stored} events but the append starts at "
        f"seq {first}; another writer appended to it",
        code="SEQ_CONFLICT",
    )


def already_exists(session_id: str) -> StoreError:
    """The refusal of creating a session whose id is stored."""
    return StoreError(f"session {session_id!r} already exists", code="SESSION_ALREADY_EXISTS")


def cannot_open(session_id: str, what: str, exc: OSError, store: str) -> StoreError:
    """The failure to open *what* (a session's file or its lock file), out of files or not."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        message = (
            f"session {session_id!r}: the process ran out of open files ({exc.strerror}); "
            f"the {store} store keeps one open file per live session: raise the limit "
            "(ulimit -n) or use PostgresStore"
        )
    else:
        message = f"session {session_id!r}: cannot open {what}: {exc}"
    return StoreError(message, code="STORAGE_ERROR")
