"""SQLite session claims: one writer per session, by a ``flock``-ed lock file each."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import final

from retinue._errors import StoreError

from ._common import cannot_open, lock_file
from ._ids import file_stem

__all__ = ["SessionLocks"]


@final
class SessionLocks:
    """The claimed sessions of one backend: an open, ``flock``-ed lock file each.

    ``flock`` conflicts between open file descriptions, so two stores in one
    process exclude each other as two processes do; a killed process drops
    its locks. A released lock file is unlinked while still locked, so the
    directory holds only live claims (a lock won on an unlinked file is retried).
    """

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._held: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def open(self) -> None:
        """Take claims again after :meth:`release_all` (the backend reopened)."""
        with self._lock:
            self._closed = False

    def holds(self, session_id: str) -> bool:
        """Whether *session_id* is claimed here."""
        with self._lock:
            return session_id in self._held

    def acquire(self, session_id: str) -> bool:
        """Lock *session_id*; false if it was already held here. Raises ``SESSION_LOCKED``."""
        with self._lock:
            if self._closed:
                raise StoreError(
                    f"session {session_id!r}: the SQLite store is closed", code="STORE_CLOSED"
                )
            if session_id in self._held:
                return False
            path = os.path.join(self._directory, _lock_name(session_id))
            try:
                os.makedirs(self._directory, exist_ok=True)
                fd = lock_file(path)
            except OSError as exc:
                raise cannot_open(session_id, "its lock file", exc, "SQLite") from exc
            if fd is None:
                raise StoreError(
                    f"session {session_id!r} is being written by another process or store",
                    code="SESSION_LOCKED",
                )
            self._held[session_id] = (path, fd)
            return True

    def release(self, session_id: str) -> None:
        with self._lock:
            held = self._held.pop(session_id, None)
        if held is not None:
            path, fd = held
            with contextlib.suppress(OSError):
                os.unlink(path)
            os.close(fd)

    def release_all(self) -> None:
        """Drop every claim and refuse new ones until :meth:`open`."""
        with self._lock:
            self._closed = True
            held = list(self._held)
        for session_id in held:
            self.release(session_id)


def _lock_name(session_id: str) -> str:
    return f"{file_stem(session_id)}.lock"
