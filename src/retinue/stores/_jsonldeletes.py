"""Deletes of the JSONL store: a session's file taken out of place under its own lock, and its
cwd bucket with it once empty; and the new files made in a bucket a delete may remove."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from retinue._errors import StoreError

from ._ids import file_stem
from ._jsonlfiles import ATTEMPTS, fsync_directory, held_in_place, make_directory, open_temporary
from ._jsonlreads import SessionFileReads
from ._jsonlsteps import Group, opening

__all__ = ["SessionFileDeletes"]


class SessionFileDeletes(SessionFileReads):
    """The delete of :class:`~retinue.stores._jsonl.JSONLBackend`, and its buckets' lifetime.

    A file is only ever removed by whoever holds its lock (see
    :mod:`~retinue.stores._jsonlfiles`): a delete removes the file its claim
    holds open, never one put at its path since, and one unlink is the whole
    delete, so a crash leaves the session whole or gone. A bucket it empties
    goes too: a creation in it (this store's or another's) makes it again,
    and holds it from the moment its temporary lies in it, as a bucket holding
    a file is never removed.
    """

    _durable_buckets: set[Path]
    """Buckets this backend made or synced, so a creation in one skips both."""

    def delete(self, session_id: str) -> None:
        """Remove the session's file, which the caller's claim holds open and locked.

        Every name of that one file in the buckets goes (a bucket linked to
        another reaches it twice), each bucket is synced so the removal is
        durable, then removed if that left it empty.
        """
        with self._lock:
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
                    # Gone already: another store's delete emptied and removed it since.
                    with contextlib.suppress(FileNotFoundError):
                        fsync_directory(bucket)
            for path in names:
                self._remove_if_empty(path.parent)

    def _names_of(self, session_id: str, fd: int) -> list[Path]:
        """The paths in the buckets that name the file open as *fd*."""
        name = f"{file_stem(session_id)}.jsonl"
        return [
            bucket / name
            for bucket in self._buckets_of(session_id)
            if held_in_place(bucket / name, fd) is not None
        ]

    def _remove_if_empty(self, bucket: Path) -> None:
        """Remove *bucket* if it holds nothing (a link to a directory is left: it is no bucket
        this store made). Best effort: the session is deleted whether or not it goes."""
        self._durable_buckets.discard(bucket)
        with contextlib.suppress(OSError):
            os.rmdir(bucket)  # refused for a bucket holding a file, or a link
            fsync_directory(bucket.parent)

    def _make_bucket(self, bucket: Path) -> None:
        """Create *bucket* and sync it into the root, once per bucket and backend.

        Synced even when it exists: the writer that made it may not have synced it yet.
        """
        if bucket in self._durable_buckets:
            return
        if bucket.is_dir():
            fsync_directory(bucket.parent)
        else:
            make_directory(bucket)
        self._durable_buckets.add(bucket)

    def _temporary_in_bucket(self, path: Path, group: Group) -> tuple[Path, int]:
        """A new locked temporary beside *path*, its bucket made first if need be and open in
        *group* (to sync the link into it).

        A delete in any store may remove the bucket while it is empty: made or opened
        before, it may be gone, or made anew, by the time the temporary is. Once the
        temporary lies in the bucket open in *group*, no delete removes it.
        """
        bucket = path.parent
        for _ in range(ATTEMPTS):
            self._make_bucket(bucket)
            try:
                if bucket not in group.directories:
                    # Opened now: once the files fill the descriptor table it could not be.
                    group.directories[bucket] = os.open(bucket, os.O_RDONLY)
                temporary, fd = open_temporary(path)
            except FileNotFoundError:
                self._forget_bucket(bucket, group)
                continue
            if held_in_place(bucket, group.directories[bucket]) is not None:
                return temporary, fd
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            os.close(fd)
            self._forget_bucket(bucket, group)
        raise OSError(errno.EAGAIN, "a delete removed the bucket each time", str(bucket))

    def _forget_bucket(self, bucket: Path, group: Group) -> None:
        """Forget *bucket*, removed by a delete: made (and opened) again for the next file."""
        self._durable_buckets.discard(bucket)
        opened = group.directories.pop(bucket, None)
        if opened is not None:
            os.close(opened)
