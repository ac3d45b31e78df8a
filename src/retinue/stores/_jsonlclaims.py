"""JSONL claims of new ids: the id's creation marker, held from its session's creation on."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import final

from retinue._errors import StoreError

from ._ids import file_stem
from ._jsonlfiles import close_all, mark_creation, open_marker_temporary, remove_held
from ._jsonlsteps import opening

__all__ = ["NewClaims"]


@final
class NewClaims:
    """The creation markers a JSONL backend holds for the new ids it claimed.

    A marker is the one name of a locked file, empty until the id's first
    write fills it: held, it keeps every other writer's creation of the id
    out, as a group's own marker does, until that write links the file in as
    the session's (its lock, on the claim's own descriptor, holding the id from
    then on) or the claim is released. A crash drops the lock, and the next creation
    or leftover sweep replaces or removes the marker. Called under the backend's lock.
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        self._held: dict[str, tuple[Path, int]] = {}

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._held

    def ids(self) -> list[str]:
        """The ids claimed, in no particular order."""
        return list(self._held)

    def take(self, session_id: str) -> bool:
        """Take the id's creation marker; whether it was taken now (false: held here already).

        Raises ``SESSION_LOCKED`` if another writer is creating the id."""
        if session_id in self._held:
            return False
        with opening(session_id):
            held = self._mark(file_stem(session_id))
        if held is None:
            raise StoreError(f"session {session_id!r} is being created", code="SESSION_LOCKED")
        self._held[session_id] = held
        return True

    def _mark(self, stem: str) -> tuple[Path, int] | None:
        """The marker of the id stored as *stem*, and the descriptor locking it; ``None`` if a
        live writer holds it. Its temporary lies beside it: no bucket is known yet."""
        temporary, fd = open_marker_temporary(self._root, stem)
        try:
            marker = mark_creation(temporary, self._root, stem)
        except BaseException:
            os.close(fd)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        if marker is None:
            os.close(fd)
            return None
        return marker, fd

    def file_of(self, session_id: str) -> tuple[Path, int]:
        """The id's marker and the descriptor locking it: the file its first write fills."""
        return self._held[session_id]

    def settle(self, session_id: str) -> None:
        """Remove the id's marker and forget the claim, its descriptor left open: its file,
        linked in by its first write, is the session's, and its lock holds the id from now on."""
        marker, fd = self._held.pop(session_id)
        with contextlib.suppress(OSError):
            remove_held(marker, fd)

    def hand_over(self, session_id: str) -> tuple[Path, int]:
        """Forget the id's claim, its marker and descriptor passing to the caller, still held."""
        return self._held.pop(session_id)

    def restore(self, session_id: str, held: tuple[Path, int]) -> None:
        """Hold again the claim :meth:`hand_over` gave out, its marker still locked by its
        descriptor."""
        self._held[session_id] = held

    def drop(self, session_id: str) -> None:
        """Remove the id's marker, if held here, and drop its lock."""
        held = self._held.pop(session_id, None)
        if held is not None:
            with contextlib.suppress(OSError):
                remove_held(*held)
            close_all([held[1]])
