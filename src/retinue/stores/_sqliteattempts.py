"""Waits of the SQLite store for another connection's lock, in short attempts."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

__all__ = ["busy", "in_short_attempts"]

_ATTEMPT_MS = 100
"""How long each attempt waits for another connection's lock when opening or beginning a
commit: between two, a cancel ends the wait, and for a commit a close too (SQLite's busy
wait heeds neither)."""


def in_short_attempts(
    conn: sqlite3.Connection,
    attempt: Callable[[], object],
    *,
    between: Callable[[], None],
    timeout_ms: int,
) -> None:
    """Run *attempt* until no other connection's lock refuses it, each try waiting briefly.

    *between* runs after each refused try and raises to end the wait. Raises the last
    ``SQLITE_BUSY`` once *timeout_ms*, the busy timeout, is over, as one try waiting all
    of it would; the busy timeout is *conn*'s again after.
    """
    give_up = time.monotonic() + timeout_ms / 1000
    conn.execute(f"PRAGMA busy_timeout = {_ATTEMPT_MS}")
    try:
        while True:
            try:
                attempt()
                return
            except sqlite3.OperationalError as exc:
                if not busy(exc) or time.monotonic() >= give_up:
                    raise
            between()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")


def busy(exc: sqlite3.OperationalError) -> bool:
    """Whether *exc* says another connection's lock outlasted the busy timeout."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY
