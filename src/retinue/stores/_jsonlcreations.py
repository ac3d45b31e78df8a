"""New session files of the JSONL store: a first write's file, made and marked, and what a
failed one left."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from retinue._errors import StoreError
from retinue.session import SessionHeader
from retinue.session._codec import encode_header

from ._backend import AppendBatch
from ._common import already_exists, held_elsewhere
from ._jsonlclaims import NewClaims
from ._jsonlfiles import (
    close_all,
    fsync_directory,
    link_temporary,
    make_directory,
    mark_creation,
    open_temporary,
    remove_held,
    write_all,
)
from ._jsonlreads import SessionFileReads
from ._jsonlsteps import Group, LeftFile, NewFile, discard, opening, session_path

__all__ = ["SessionFileCreations"]


class SessionFileCreations(SessionFileReads):
    """The first writes of :class:`~retinue.stores._jsonl.JSONLBackend`'s new sessions.

    A new session's file is written under a temporary name, synced and linked
    in by the backend's group commit; here it is made, marked as the id's one
    creation, written, and taken out again when its group fails.
    """

    _creating: NewClaims
    """The creation markers of the new ids claimed."""
    _durable_buckets: set[Path]
    """The buckets made (or found) and synced into the root."""

    def _write_new(self, batch: AppendBatch, data: bytes, group: Group) -> StoreError | None:
        """Write a new session under a temporary name; it is linked in after the sync."""
        assert batch.header is not None
        try:
            new = self._create(batch, batch.header, group)
        except StoreError as exc:
            return exc
        group.new.append(new)
        content = (encode_header(batch.header) + "\n").encode() + data
        write_all(new.fd, content)
        new.size = len(content)
        group.touched.append(new.fd)
        return None

    def _create(self, batch: AppendBatch, header: SessionHeader, group: Group) -> NewFile:
        """Open a new session's temporary file, marked as the id's one creation in progress.

        The marker is taken before the existence check and kept until after the
        link, so of two writers creating one id (at any cwds) the second is refused.
        """
        self._remove_left(batch.session_id)
        with opening(batch.session_id):
            path = session_path(self._root, header)
            self._make_bucket(path.parent)
            group.directories.add(path.parent)
            claimed = batch.session_id in self._creating
            new = self._claims_file(batch, path, group) if claimed else None
            if new is None:
                new = self._own_temporary(batch, path, group)
            claimed_here = False
            try:
                # A claimed id's marker is held already: the claim keeps it until linked in.
                if not claimed:
                    claimed_here = self._mark(new, path)
                elsewhere = not claimed and not claimed_here and new.marker is None
                if not elsewhere and self._find(batch.session_id) is None:
                    return new
            except BaseException:
                self._undo_create(new, claimed_here=claimed_here)
                raise
        self._undo_create(new, claimed_here=claimed_here)
        raise held_elsewhere(batch.session_id) if elsewhere else already_exists(batch.session_id)

    def _mark(self, new: NewFile, path: Path) -> bool:
        """Mark *new* as its id's one creation; whether a claim of the id was taken for it.

        Its marker is its temporary linked under the root. A bucket on another
        file system (mounted, or a link to a folder there) cannot be linked from
        there: a claim of the id stands for the marker instead, as a claimed
        first write's does, given up once the file is linked in (kept for the
        retry when the group fails). ``new.marker`` stays ``None`` and no claim is
        taken while a live writer is creating the id.
        """
        try:
            new.marker = mark_creation(new.temporary, self._root, path.stem)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            try:
                return self._creating.take(new.session_id)
            except StoreError as refused:
                if refused.code != "SESSION_LOCKED":  # a live writer is creating the id
                    raise
        return False

    def _undo_create(self, new: NewFile, *, claimed_here: bool) -> None:
        discard(new)
        if claimed_here:
            self._creating.drop(new.session_id)

    def _claims_file(self, batch: AppendBatch, path: Path, group: Group) -> NewFile | None:
        """The claim's own locked file, emptied and linked beside *path* as the temporary to
        write; ``None`` if *path* lies on another file system than the claim's marker.

        A temporary of its own would be a second descriptor per claimed id while
        its group is written: a group of N first writes would need 2N, and fail
        past half the process's limit. The claim's file costs none: synced and
        linked in, it is the session's, its lock (the claim's) holding it on.
        """
        marker, fd = self._creating.file_of(batch.session_id)
        try:
            temporary = link_temporary(marker, path)
        except OSError as exc:
            if exc.errno == errno.EXDEV:  # a bucket mounted or linked elsewhere: a temporary there
                return None
            raise
        new = NewFile(group.index, batch.session_id, temporary, path, fd, len(batch.events), None)
        new.borrowed = True
        try:
            os.ftruncate(fd, 0)  # what a failed group wrote to it before
        except BaseException:
            discard(new)
            raise
        return new

    @staticmethod
    def _own_temporary(batch: AppendBatch, path: Path, group: Group) -> NewFile:
        """A new locked temporary file beside *path*: the descriptor its session keeps."""
        if group.reserve < 0:
            # Once the temporaries (or other threads) fill the table, no bucket could be opened.
            # Not taken for a claim's file, which opens none: at a full table, the one slot its
            # lookup used is the one its bucket's sync needs, and a reserve would take it.
            group.reserve = os.open(path.parent, os.O_RDONLY)
        temporary, fd = open_temporary(path)
        return NewFile(group.index, batch.session_id, temporary, path, fd, len(batch.events), None)

    def _remove_left(self, session_id: str) -> None:
        """Remove the file a failed creation of *session_id* left, before creating it again."""
        left = self._left.get(session_id)
        if left is None:
            return
        try:
            remove_held(left.path, left.fd)
        except OSError as exc:
            raise StoreError(
                f"session {session_id!r}: a failed creation left {left.path}, which no flush "
                f"acknowledged, and removing it failed ({exc})",
                code="STORAGE_ERROR",
            ) from exc
        del self._left[session_id]
        if left.marker is None:
            close_all([left.fd])
        else:  # the claim the file took over: held again, to keep the id for this creation
            self._creating.restore(session_id, (left.marker, left.fd))

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

    def _unlink_new(self, new: NewFile) -> None:
        """Take a failed group's new file out of place, or keep it locked as left behind."""
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(new.path)
        except OSError:
            # Left unlocked, it would be a stored session to the next creation and load alike.
            if new.borrowed:  # the claim's file: the claim goes with it, its marker kept held
                marker, _ = self._creating.hand_over(new.session_id)
                self._left[new.session_id] = LeftFile(new.path, new.fd, marker)
            else:
                self._left[new.session_id] = LeftFile(new.path, new.fd)
            new.fd = -1
