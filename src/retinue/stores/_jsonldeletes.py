"""Deletes of the JSONL store: a session's file taken out of place under its own lock."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from retinue._errors import StoreError

from ._ids import file_stem
from ._jsonlfiles import fsync_directory, held_in_place
from ._jsonlreads import SessionFileReads
from ._jsonlsteps import opening

__all__ = ["SessionFileDeletes"]


class SessionFileDeletes(SessionFileReads):
    """The delete of :class:`~retinue.stores._jsonl.JSONLBackend`.

    A file is only ever removed by whoever holds its lock (see
    :mod:`~retinue.stores._jsonlfiles`): a delete removes the file its claim
    holds open, never one put at its path since, and one unlink is the whole
    delete, so a crash leaves the session whole or gone.
    """

    def delete(self, session_id: str) -> None:
        """Remove the session's file, which the caller's claim holds open and locked.

        Every name of that one file in the buckets goes (a bucket linked to
        another reaches it twice), then each bucket is synced so the removal is
        durable. The bucket itself stays, empty or not: another store's
        creation in it may be under way, past its check that the bucket exists.
        """
        with self._lock:
            self._check_open()  # a close meanwhile gave the claim up with the file
            handle = self._open.get(session_id)
            if handle is None:
                raise StoreError(
                    f"session {session_id!r}: deleting it needs its claim", code="STORAGE_ERROR"
                )
            with opening(session_id):
                names = self._names_of(session_id, handle.fd)
                if not names:
                    raise StoreError(
                        f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND"
                    )
                for path in names:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                for bucket in {path.parent.resolve() for path in names}:
                    fsync_directory(bucket)

    def _names_of(self, session_id: str, fd: int) -> list[Path]:
        """The paths in the buckets that name the file open as *fd*."""
        name = f"{file_stem(session_id)}.jsonl"
        return [
            bucket / name
            for bucket in self._buckets_of(session_id)
            if held_in_place(bucket / name, fd) is not None
        ]
