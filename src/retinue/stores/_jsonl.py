"""The JSONL store: one file per session, header line then one event per line."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import final

from retinue._errors import CorruptSessionError, StoreError
from retinue.session._codec import encode_event

from ._backend import AppendBatch
from ._common import already_exists, cannot_open, claim_new_id
from ._jsonlclaims import NewClaims
from ._jsonlcreations import SessionFileCreations
from ._jsonldeletes import SessionFileDeletes
from ._jsonlfiles import (
    ATTEMPTS,
    SessionFile,
    close_all,
    held_in_place,
    lock_stored,
    make_directory,
    remove_held,
    remove_leftovers,
    root_path,
    unpadded,
    write_all,
)
from ._jsonlreads import record_of
from ._jsonlsteps import (
    Group,
    LeftFile,
    after_torn_line,
    discard,
    opening,
    session_path,
    syncfs_function,
    unterminated_line,
)
from ._writebehind import BufferedStore

__all__ = ["JSONLBackend", "JSONLStore", "session_path"]

SYNCFS_THRESHOLD = 8


_syncfs = syncfs_function()


def _sync_file_system(fd: int) -> None:
    """``syncfs`` the file system of *fd*, raising its failure."""
    assert _syncfs is not None
    if _syncfs(fd) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


@final
class JSONLBackend(SessionFileDeletes, SessionFileCreations):
    """Session files under a root directory; every method blocks.

    A new session's file is written under a temporary name of its own, synced,
    and linked into place, so header and first batch appear atomically (R11.3).
    Meanwhile the temporary is also linked as the id's creation marker in the
    root's markers' directory, so one id is created once whatever the cwd
    (R11.11); a claim of a new id holds that marker from its session's creation
    to its first write, which fills the claim's own marker file and links it
    in instead (one descriptor per claimed session, its group's first writes
    included). The root itself holds only the cwd buckets: a lookup of
    an id reads as much whatever the number of ids being created. An
    attached session's file stays open with an exclusive ``flock`` until it is
    released, so a second writer (another process or store) is refused: open
    files are live sessions. A session whose file cannot be opened (say, the
    process is out of file descriptors) fails alone with a ``StoreError``. A
    group's appends are made durable by one ``syncfs`` per file system (or one
    ``fdatasync`` per file for small groups). An append must start at the seq
    after the file's last complete line, else it is refused ``SEQ_CONFLICT``
    (R11.4), as it is after a line a crash cut short, naming the file and
    line. A failed group is cut back to what was committed; a file that
    cannot be is appended to no more (its flushes fail) until it can be. A new
    file it linked in and cannot remove stays locked, and the id's next
    creation removes it first: a failed creation never leaves its id refused.
    A read of a file it does not hold leaves an unterminated last line out
    unreported: it may be a live writer's append still under way. An
    unterminated last line that parses whole (the header, or a record) lacks
    only its newline (a hand edit): it is read as any other line, and the
    next append ends it first, whether or not a load read the file.
    """

    blocking = True
    durable = True
    writes_can_tear = True
    """An append reaches the file page by page: a crash can keep part of it (R11.8)."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        self._root = root_path(root)
        self._creates = create
        self._open: dict[str, SessionFile] = {}
        self._durable_buckets: set[Path] = set()
        self._left: dict[str, LeftFile] = {}
        self._creating = NewClaims(self._root)
        self._lock = threading.RLock()
        self._closed = False
        """Set by :meth:`close`: a claim or write still on its way is refused, not taken up."""

    def open(self) -> None:
        """Create the root directory (durably) and remove the temporary files of crashed writers.

        With ``create=False`` neither, only a check that the root is a directory:
        a reader changes nothing, and a read-only root (a mounted backup) opens.
        Leftovers are no stored sessions to it.
        """
        with self._lock:
            self._closed = False
        if not self._creates:
            if not self._root.is_dir():
                problem = "not a directory" if self._root.exists() else "no such directory"
                code = errno.ENOTDIR if self._root.exists() else errno.ENOENT
                raise OSError(code, problem, str(self._root))
            return
        make_directory(self._root)
        remove_leftovers(self._root)

    # -- writes ---------------------------------------------------------------

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        """Write every batch, then make the group durable with one sync (two if files are new)."""
        with self._lock:
            self._check_open()
            group = Group()
            try:
                results: list[StoreError | None] = []
                for index, batch in enumerate(batches):
                    group.index = index
                    results.append(self._write_one(batch, group))
                self._sync(group.touched)
                self._link_new(group, results)
            except BaseException:
                self._undo(group)  # a claimed id keeps its marker, for the retry to create it
                raise
            else:
                self._settle_claims(group)
            finally:
                group.free_reserve()
            return results

    def _settle_claims(self, group: Group) -> None:
        """Give up the claims of a committed group's new files: their own locks hold the ids."""
        for new in group.new:
            if new.borrowed and new.linked:
                self._creating.settle(new.session_id)  # the claim's file is the session's
            elif new.linked:
                self._creating.drop(new.session_id)

    def _write_one(self, batch: AppendBatch, group: Group) -> StoreError | None:
        data = "".join(encode_event(event) + "\n" for event in batch.events).encode()
        if batch.header is not None:
            return self._write_new(batch, data, group)
        try:
            handle = self._handle(batch.session_id)
        except StoreError as exc:
            return exc
        except CorruptSessionError as exc:
            # Stored in two files (a session attached without a load): its own refusal alone.
            return StoreError(exc.message, code=exc.code)
        if handle.uncut is not None and not handle.cut_back():
            return self._uncut_error(batch.session_id, handle.uncut)
        try:
            handle = self._measured_again_if_changed(batch.session_id, handle)
        except StoreError as exc:
            return exc
        if batch.truncate_to is not None:
            handle.truncate(batch.truncate_to)
        refusal = (
            after_torn_line(batch.session_id, handle)
            if handle.torn
            else handle.check_next(batch.session_id, batch.first_seq)
        )
        if refusal is not None:
            return refusal
        handle.cut_padding()
        group.rollbacks.append((handle, handle.size, handle.count, handle.open_line))
        data = handle.line_start() + data
        write_all(handle.fd, data)
        handle.size += len(data)
        handle.count += len(batch.events)
        handle.open_line = False
        group.touched.append(handle.fd)
        return None

    def _measured_again_if_changed(self, session_id: str, handle: SessionFile) -> SessionFile:
        """*handle*, measured again if its file's size is not what this store wrote; refused
        (``SESSION_NOT_FOUND``) if its path no longer names its file.

        Something that ignores the lock (an editor, a script) wrote to or cut the
        file: appended after its bytes, acknowledged events would follow a line
        that is no event, and the session would not load again. Measured again,
        the append is refused as after any line that does not end the stored log.
        One ``stat`` and one ``fstat`` per session and group.
        """
        with opening(session_id):
            status = held_in_place(handle.path, handle.fd)
        if status is None:
            # Removed, moved, or replaced by a rename (a hard link elsewhere keeps it alive):
            # what is appended to it is lost with it.
            raise StoreError(
                f"session {session_id!r}: its file {handle.path} was moved, removed or replaced while "
                "the session was attached; nothing is appended to it",
                code="SESSION_NOT_FOUND",
            )
        if status.st_size == handle.size:
            return handle
        handle.measured = False
        return self._handle(session_id)

    def _uncut_error(self, session_id: str, exc: OSError) -> StoreError:
        handle = self._open.get(session_id)
        where = "its file" if handle is None else handle.path
        return StoreError(
            f"session {session_id!r}: a failed write left events no flush acknowledged in "
            f"{where} and cutting them off failed ({exc}); nothing is appended to the file "
            "until they are cut off (a load repairs them as a crashed write's tail)",
            code="STORAGE_ERROR",
        )

    def _link_new(self, group: Group, results: list[StoreError | None]) -> None:
        linked: set[Path] = set()
        for new in group.new:
            try:
                os.link(new.temporary, new.path)
            except FileExistsError:
                results[new.batch_index] = already_exists(new.session_id)
                discard(new)
                continue
            # Linked before anything else can fail: a failed group must take it out again.
            new.linked = True
            linked.add(new.path.parent)
            self._open[new.session_id] = SessionFile(new.fd, new.path, new.size, new.count)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(new.temporary)
            new.unmark()
        if linked:
            group.free_reserve()
            self._sync_directories(list(linked))

    def _sync(self, fds: list[int]) -> None:
        if _syncfs is not None and len(fds) >= SYNCFS_THRESHOLD:
            # One syncfs per file system: a bucket may be a mount point or a link to another.
            for fd in {os.fstat(fd).st_dev: fd for fd in fds}.values():
                _sync_file_system(fd)
            return
        for fd in fds:
            os.fdatasync(fd)

    def _sync_directories(self, directories: list[Path]) -> None:
        """Make the entries of *directories* durable, each open only while it is synced.

        A group's new sessions may have as many cwds as sessions: their buckets
        held open together would cost a descriptor per session again.
        """
        whole = _syncfs is not None and len(directories) >= SYNCFS_THRESHOLD
        if whole:
            # One per file system (the one a bucket links to, for a link).
            directories = list({os.stat(path).st_dev: path for path in directories}.values())
        for directory in directories:
            fd = os.open(directory, os.O_RDONLY)
            try:
                _sync_file_system(fd) if whole else os.fdatasync(fd)
            finally:
                os.close(fd)

    def _undo(self, group: Group) -> None:
        for handle, size, count, open_line in group.rollbacks:
            # The next write's rollback point: the file's length again, not the failed write's end.
            handle.size = size
            handle.count = count
            handle.open_line = open_line
            handle.cut_back()
        for new in group.new:
            if new.linked:
                self._open.pop(new.session_id, None)
                self._unlink_new(new)
            discard(new)

    # -- open files and claims ------------------------------------------------

    def _handle(self, session_id: str) -> SessionFile:
        """The session's open file, measured, to write to."""
        handle = self._claimed(session_id)
        if not handle.measured:
            with opening(session_id):
                handle.measure()
                line = unterminated_line(handle)
                if handle.torn and record_of(line, handle.count):
                    # Lacking only its newline, as a load finds it: a record to append after.
                    handle.keep_fragment(len(line) - len(unpadded(line)))
        return handle

    def _claimed(self, session_id: str) -> SessionFile:
        """The session's open file, opened and locked now if need be; nothing of it read."""
        handle = self._open.get(session_id)
        if handle is not None:
            return handle
        for _ in range(ATTEMPTS):
            with opening(session_id):
                path = self._only_stored(session_id)
                if path is None:
                    raise StoreError(
                        f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND"
                    )
                try:
                    fd = os.open(path, os.O_RDWR | os.O_APPEND)
                except FileNotFoundError:
                    continue  # deleted since it was found: looked up again, it is not stored
            if self._locked(session_id, path, fd):
                handle = SessionFile(fd, path, measured=False)
                self._open[session_id] = handle
                return handle
            os.close(fd)  # taken out or replaced by its holder meanwhile: look it up again
        raise StoreError(
            f"session {session_id!r}: its file was replaced each time it was opened",
            code="STORAGE_ERROR",
        )

    @staticmethod
    def _locked(session_id: str, path: Path, fd: int) -> bool:
        """Lock the session's file open as *fd*; whether it is still the file at *path*."""
        try:
            return lock_stored(fd, path)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(
                f"session {session_id!r} is being written by another process or store",
                code="SESSION_LOCKED",
            ) from None
        except OSError as exc:
            os.close(fd)
            raise cannot_open(session_id, "its file", exc, "JSONL") from exc
        except BaseException:
            os.close(fd)
            raise

    def claim(self, session_id: str) -> None:
        """Open the session's file and lock it exclusively until :meth:`release`.

        Raises ``SESSION_LOCKED`` if another writer holds it, and a
        ``STORAGE_ERROR`` naming the session if the file cannot be opened.
        """
        with self._lock:
            self._check_open()
            self._claimed(session_id)

    def claim_new(self, session_id: str) -> None:
        """Hold the creation marker of a session not stored yet until its first write links its
        file in, or :meth:`release`; ``SESSION_ALREADY_EXISTS`` if it is stored or being created."""
        with self._lock:
            self._check_open()
            # A file a failed creation of the id left (held, as it could not be removed) is
            # taken out first, its claim given back: else this writer's own leftover would
            # read as the id stored by another.
            self._remove_left(session_id)
            claim_new_id(
                session_id,
                lambda: self._creating.take(session_id),
                lambda: self._creating.drop(session_id),
                lambda: self._stored(session_id) is not None,
            )

    def release(self, session_id: str) -> None:
        """Close the session's file, dropping its lock."""
        with self._lock:
            handle = self._open.pop(session_id, None)
            if handle is not None:
                os.close(handle.fd)
            self._creating.drop(session_id)

    def close(self) -> None:
        """Close every open file (dropping every lock); refuse claims and writes until :meth:`open`."""
        with self._lock:
            self._closed = True
            for session_id in [*self._open, *self._creating.ids()]:
                self.release(session_id)
            while self._left:
                _, left = self._left.popitem()
                for name in (left.path, left.marker):
                    if name is not None:
                        with contextlib.suppress(OSError):
                            remove_held(name, left.fd)
                close_all([left.fd])


@final
class JSONLStore(BufferedStore):
    """Sessions as JSONL files under *root*: one per session, in a directory per working
    directory (``cwd-<12 hex of its SHA-256>``, or ``_no-cwd``), named by the escaped id,
    its header line first, then one event per line.

    Also the format of ``retinue sessions export``/``import``. Use as
    ``async with JSONLStore(path) as store:`` for group commit.
    ``create=False`` opens only an existing directory, as it is: the temporary
    files crashed writers left in it are not removed (what a reader of
    someone's store wants, on a read-only file system too).

    Raises:
        ConfigError: ``INVALID_STORE_PATH``: *root* holds a NUL character, or is empty.
    """

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        super().__init__(JSONLBackend(root, create=create), name=f"JSONLStore({os.fspath(root)!r})")
