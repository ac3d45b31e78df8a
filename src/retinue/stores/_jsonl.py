"""The JSONL store (SPEC 11.4): one file per session, header line then one event per line."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import final

import attrs

from retinue._errors import StoreError
from retinue.session import SessionHeader
from retinue.session._codec import encode_event, encode_header

from ._backend import AppendBatch, StoredLog
from ._common import already_exists, cannot_open, parse_header, parse_headers, seq_conflict
from ._ids import bucket_name, file_stem
from ._jsonlfiles import (
    fsync_directory,
    make_directory,
    mark_creation,
    open_temporary,
    remove_leftovers,
    unmark_creation,
)
from ._writebehind import BufferedStore

__all__ = ["JSONLBackend", "JSONLStore", "session_path"]

SYNCFS_THRESHOLD = 8


def session_path(root: str | os.PathLike[str], header: SessionHeader) -> Path:
    """Where a session lives: ``root/<bucket of cwd>/<escaped id>.jsonl`` (R11.12).

    An id whose escaped form would not fit a file name is shortened with a hash
    (:func:`file_stem`).
    """
    return Path(root) / bucket_name(header.cwd) / f"{file_stem(header.id)}.jsonl"


@attrs.define(eq=False)
class _Open:
    fd: int
    size: int
    count: int
    """Complete event lines in the file: the seq the next append must start at."""
    torn: bool = False
    """Whether an unterminated fragment ends the file (only a repair may append after it)."""
    uncut: OSError | None = None
    """Why a failed write's bytes could not be cut off past ``size``: until they are, no append."""

    def cut_back(self) -> bool:
        """Cut the file back to its committed ``size``; whether it is (else nothing may follow).

        Bytes of a failed write left in place would end up between committed
        lines, a retried batch after a copy of itself, and the log unloadable.
        """
        try:
            os.ftruncate(self.fd, self.size)
        except OSError as exc:
            self.uncut = exc
            return False
        self.uncut = None
        return True

    def check_next(self, session_id: str, first_seq: int) -> StoreError | None:
        """Refuse an append that does not continue the stored log, as the other stores do."""
        if self.torn or first_seq != self.count:
            # A fragment counts as a record, as the loader counts it.
            return seq_conflict(session_id, self.count + self.torn, first_seq)
        return None


@attrs.define(eq=False)
class _New:
    batch_index: int
    session_id: str
    temporary: Path
    path: Path
    fd: int
    count: int
    marker: Path | None
    """The id's creation marker, removed once linked in or undone, before the file is closed."""
    size: int = 0
    linked: bool = False

    def unmark(self) -> None:
        if self.marker is not None:
            unmark_creation(self.marker)
            self.marker = None


@attrs.define(eq=False)
class _Group:
    """What one group commit touched, to sync it and to undo it on failure."""

    index: int = 0
    touched: list[int] = attrs.Factory(list)
    rollbacks: list[tuple[_Open, int, int]] = attrs.Factory(list)
    new: list[_New] = attrs.Factory(list)
    directories: dict[Path, int] = attrs.Factory(dict)


def _syncfs_function() -> ctypes._NamedFuncPointer | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    return getattr(libc, "syncfs", None)


_syncfs = _syncfs_function()


@final
class JSONLBackend:
    """Session files under a root directory; every method blocks.

    A new session's file is written under a temporary name of its own, synced,
    and linked into place, so header and first batch appear atomically (R11.3).
    Meanwhile the temporary is also linked as the id's creation marker under the
    root, so one id is created once whatever the cwd (R11.11). An
    attached session's file stays open with an exclusive ``flock`` until it is
    released, so a second writer (another process or store) is refused: open
    files are live sessions. A session whose file cannot be opened (say, the
    process is out of file descriptors) fails alone with a ``StoreError``. A
    group's appends are made durable by one ``syncfs`` per file system (or one
    ``fdatasync`` per file for small groups). An append must start at the seq
    after the file's last complete line, else it is refused ``SEQ_CONFLICT``
    (R11.4). A failed group is cut back to what was committed; a file that
    cannot be is appended to no more (its flushes fail) until it can be.
    """

    blocking = True
    durable = True

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)
        self._open: dict[str, _Open] = {}
        self._paths: dict[str, Path] = {}
        self._durable_buckets: set[Path] = set()
        self._lock = threading.RLock()

    def open(self) -> None:
        """Create the root directory (durably) and remove the temporary files of crashed writers."""
        make_directory(self._root)
        remove_leftovers(self._root)

    # -- writes ---------------------------------------------------------------

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        """Write every batch, then make the group durable with one sync (two if files are new)."""
        with self._lock:
            group = _Group()
            try:
                results: list[StoreError | None] = []
                for index, batch in enumerate(batches):
                    group.index = index
                    results.append(self._write_one(batch, group))
                self._sync(group.touched)
                self._link_new(group, results)
            except BaseException:
                self._undo(group)
                raise
            finally:
                _close_all(group.directories.values())
            return results

    def _write_one(self, batch: AppendBatch, group: _Group) -> StoreError | None:
        data = "".join(encode_event(event) + "\n" for event in batch.events).encode()
        if batch.header is not None:
            return self._write_new(batch, data, group)
        try:
            handle = self._handle(batch.session_id)
        except StoreError as exc:
            return exc
        if handle.uncut is not None and not handle.cut_back():
            return self._uncut_error(batch.session_id, handle.uncut)
        if batch.truncate_to is not None:
            _truncate(handle, batch.truncate_to)
        refusal = handle.check_next(batch.session_id, batch.first_seq)
        if refusal is not None:
            return refusal
        group.rollbacks.append((handle, handle.size, handle.count))
        _write_all(handle.fd, data)
        handle.size += len(data)
        handle.count += len(batch.events)
        group.touched.append(handle.fd)
        return None

    def _uncut_error(self, session_id: str, exc: OSError) -> StoreError:
        where = self._paths.get(session_id, "its file")
        return StoreError(
            f"session {session_id!r}: a failed write left events no flush acknowledged in "
            f"{where} and cutting them off failed ({exc}); nothing is appended to the file "
            "until they are cut off (a load repairs them as a crashed write's tail)",
            code="STORAGE_ERROR",
        )

    def _write_new(self, batch: AppendBatch, data: bytes, group: _Group) -> StoreError | None:
        """Write a new session under a temporary name; it is linked in after the sync."""
        assert batch.header is not None
        try:
            new = self._create(batch, batch.header, group)
        except StoreError as exc:
            return exc
        group.new.append(new)
        content = (encode_header(batch.header) + "\n").encode() + data
        _write_all(new.fd, content)
        new.size = len(content)
        group.touched.append(new.fd)
        return None

    def _create(self, batch: AppendBatch, header: SessionHeader, group: _Group) -> _New:
        """Open a new session's temporary file, marked as the id's one creation in progress.

        The marker is taken before the existence check and kept until after the
        link, so of two writers creating one id (at any cwds) the second is refused.
        """
        with _opening(batch.session_id):
            path = session_path(self._root, header)
            self._make_bucket(path.parent)
            if path.parent not in group.directories:
                # Opened now: once the files fill the descriptor table it could not be.
                group.directories[path.parent] = os.open(path.parent, os.O_RDONLY)
            temporary, fd = open_temporary(path)
            new = _New(group.index, batch.session_id, temporary, path, fd, len(batch.events), None)
            try:
                new.marker = mark_creation(temporary, self._root, path.stem)
                if new.marker is not None and self._find(batch.session_id) is None:
                    return new
            except BaseException:
                _discard(new)
                raise
        _discard(new)
        raise already_exists(batch.session_id)

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

    def _link_new(self, group: _Group, results: list[StoreError | None]) -> None:
        linked: set[Path] = set()
        for new in group.new:
            try:
                os.link(new.temporary, new.path)
            except FileExistsError:
                results[new.batch_index] = already_exists(new.session_id)
                _discard(new)
                continue
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(new.temporary)
                new.unmark()
            new.linked = True
            linked.add(new.path.parent)
            self._paths[new.session_id] = new.path
            self._open[new.session_id] = _Open(new.fd, new.size, new.count)
        if linked:
            self._sync([group.directories[directory] for directory in linked])

    def _sync(self, fds: list[int]) -> None:
        if _syncfs is not None and len(fds) >= SYNCFS_THRESHOLD:
            # One syncfs per file system: a bucket may be a mount point or a link to another.
            for fd in {os.fstat(fd).st_dev: fd for fd in fds}.values():
                if _syncfs(fd) != 0:
                    error = ctypes.get_errno()
                    raise OSError(error, os.strerror(error))
            return
        for fd in fds:
            os.fdatasync(fd)

    def _undo(self, group: _Group) -> None:
        for handle, size, count in group.rollbacks:
            # The next write's rollback point: the file's length again, not the failed write's end.
            handle.size = size
            handle.count = count
            handle.cut_back()
        for new in group.new:
            if new.linked:
                self._open.pop(new.session_id, None)
                self._paths.pop(new.session_id, None)
                with contextlib.suppress(OSError):
                    new.path.unlink()
            _discard(new)

    # -- open files and claims ------------------------------------------------

    def _handle(self, session_id: str) -> _Open:
        handle = self._open.get(session_id)
        if handle is not None:
            return handle
        with _opening(session_id):
            path = self._find(session_id)
            if path is None:
                raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(
                f"session {session_id!r} is being written by another process or store",
                code="SESSION_LOCKED",
            ) from None
        try:
            with _opening(session_id):
                handle = _measure(fd)
        except BaseException:
            os.close(fd)
            raise
        self._open[session_id] = handle
        return handle

    def claim(self, session_id: str) -> None:
        """Open the session's file and lock it exclusively until :meth:`release`.

        Raises ``SESSION_LOCKED`` if another writer holds it, and a
        ``STORAGE_ERROR`` naming the session if the file cannot be opened.
        """
        with self._lock:
            self._handle(session_id)

    def release(self, session_id: str) -> None:
        """Close the session's file, dropping its lock."""
        with self._lock:
            handle = self._open.pop(session_id, None)
            if handle is not None:
                os.close(handle.fd)

    # -- reads ----------------------------------------------------------------

    def _find(self, session_id: str) -> Path | None:
        known = self._paths.get(session_id)
        if known is not None and known.exists():
            return known
        name = f"{file_stem(session_id)}.jsonl"
        for bucket in self._buckets():
            candidate = bucket / name
            if candidate.exists():
                self._paths[session_id] = candidate
                return candidate
        return None

    def _buckets(self) -> list[Path]:
        if not self._root.is_dir():
            return []
        return [entry for entry in self._root.iterdir() if entry.is_dir()]

    def read(self, session_id: str) -> StoredLog | None:
        """The header and complete event lines; an unterminated last line is a torn fragment."""
        path = self._find(session_id)
        if path is None:
            return None
        parts = path.read_bytes().split(b"\n")
        torn = parts[-1] != b""
        complete = parts[:-1]
        if not complete:
            return StoredLog(parse_header(parts[0], session_id), (), torn_fragment=False)
        return StoredLog(parse_header(complete[0], session_id), complete[1:], torn_fragment=torn)

    def headers(self) -> list[SessionHeader]:
        """Read only the first line of each session file (R11.14)."""
        rows: list[tuple[str, bytes]] = []
        for bucket in self._buckets():
            for path in bucket.glob("*.jsonl"):
                with path.open("rb") as file:
                    rows.append((path.stem, file.readline()))
        return parse_headers(rows)

    def contains(self, session_id: str) -> bool:
        """Whether a file for the session exists in any bucket."""
        return self._find(session_id) is not None

    def close(self) -> None:
        """Close every open file (dropping every lock)."""
        with self._lock:
            for session_id in list(self._open):
                self.release(session_id)


@contextlib.contextmanager
def _opening(session_id: str) -> Iterator[None]:
    """Make a failure to open a session's file that session's error, not its group's."""
    try:
        yield
    except OSError as exc:
        raise cannot_open(session_id, "its file", exc, "JSONL") from exc


def _discard(new: _New) -> None:
    """Remove a new session's temporary file and marker, then close it (dropping their lock)."""
    with contextlib.suppress(OSError):
        os.unlink(new.temporary)
    with contextlib.suppress(OSError):
        new.unmark()
    if new.fd >= 0:
        with contextlib.suppress(OSError):
            os.close(new.fd)
        new.fd = -1


def _close_all(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _offset_after(fd: int, lines: int) -> tuple[int, int]:
    """The offset just after the first *lines* complete lines, and how many the file has."""
    offset = 0
    found = 0
    with os.fdopen(os.dup(fd), "rb") as file:
        file.seek(0)
        for _ in range(lines):
            line = file.readline()
            if not line.endswith(b"\n"):
                break
            offset += len(line)
            found += 1
    return offset, found


def _truncate(handle: _Open, truncate_to: int) -> None:
    """Cut the file after the header and *truncate_to* events (a repair drops a torn tail)."""
    keep, lines = _offset_after(handle.fd, truncate_to + 1)
    os.ftruncate(handle.fd, keep)
    handle.size = keep
    handle.count = max(lines - 1, 0)
    handle.torn = False


def _measure(fd: int) -> _Open:
    """An opened session file's size, event line count and whether a fragment ends it."""
    lines = 0
    last = b"\n"
    with os.fdopen(os.dup(fd), "rb") as file:
        file.seek(0)
        while chunk := file.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
        size = file.tell()
    # Line 1 is the header; a file holding only part of it is a fragment too.
    return _Open(fd, size, max(lines - 1, 0), torn=last != b"\n")


@final
class JSONLStore(BufferedStore):
    """Sessions as JSONL files in the SPEC 11.4 layout under *root*.

    Also the format of ``retinue sessions export``/``import``. Use as
    ``async with JSONLStore(path) as store:`` for group commit.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__(JSONLBackend(root), name=f"JSONLStore({os.fspath(root)!r})")
