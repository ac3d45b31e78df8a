"""File steps of the JSONL store: temporaries, creation locks, durable directories, leftovers,
and what the store knows of a session file it holds open.

Every file here that a crash can leave behind is held with an exclusive
``flock`` by its live writer, so "its lock can be taken" means "no live writer
has it", across processes and pid namespaces alike. A file is only ever removed
by whoever holds its lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

import attrs

from retinue._errors import ConfigError, StoreError

from ._common import refuse_unnamable, seq_conflict

__all__ = [
    "ATTEMPTS",
    "SessionFile",
    "after_last_lines",
    "close_all",
    "fsync_directory",
    "held_in_place",
    "link_temporary",
    "lock_stored",
    "make_directory",
    "mark_creation",
    "open_marker_temporary",
    "open_temporary",
    "read_whole",
    "remove_held",
    "remove_leftovers",
    "root_path",
    "unmark_creation",
    "unpadded",
    "write_all",
]

TEMPORARY_SUFFIX = ".tmp"
MARKER_SUFFIX = ".creating"
MARKERS_DIRECTORY = ".creating"
"""The root's directory of creation markers and of the temporaries they are linked from.

A dot-name: no bucket name starts with a dot (``bucket_name``), so a listing of
the buckets passes it over, and it keeps the root's listing, which each lookup
of an id reads, as long as the buckets whatever the number of ids being created.
"""
ATTEMPTS = 8
"""Retries of a name another writer removed or took in between (a race, not a polling loop)."""
_CHUNK = 1 << 20
_PADDING = bytes(range(0x21))
"""Bytes that may follow a last record in place of its newline and are no part of one: the
ASCII control characters and space. A power loss on ext4 or xfs can leave NULs where a
write's bytes never reached the disk, a flipped bit turns the newline into ``\\v``; no record
starts with one, and a record holds none outside its strings."""


@attrs.define(eq=False)
class SessionFile:
    """A session file held open and locked, and where its committed log ends."""

    fd: int
    path: Path
    size: int = 0
    count: int = 0
    """Complete event lines in the file: the seq the next append must start at."""
    torn: bool = False
    """Whether an unterminated fragment ends the file (only a repair may append after it)."""
    open_line: bool = False
    """Whether the last line, a whole header or event, lacks its newline (a hand edit, or a
    crash that cut only the newline): counted, and ended by the next append first."""
    uncut: OSError | None = None
    """Why a failed write's bytes could not be cut off past ``size``: until they are, no append."""
    padding: int = 0
    """How many bytes follow an open last line (NUL padding, say): cut off before the next
    append ends the line, so the newline follows the record itself."""
    measured: bool = True
    """Whether the fields above were taken from the file: a claim reads nothing, the load's
    read that follows it measures the file (so a load reads it once), else the first write."""

    def measure(self) -> None:
        """Read the whole file to take its measure."""
        size = 0
        newlines = 0
        last = b"\n"
        while chunk := os.pread(self.fd, _CHUNK, size):
            size += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
        self.take_measure(size, newlines, torn=last != b"\n")

    def take_measure(self, size: int, newlines: int, *, torn: bool) -> None:
        """Take the measure of the file from its size and newlines, read by the caller."""
        # Line 1 is the header: an unterminated line after it is a fragment, but an unterminated
        # header is no record (a load parses it whole before anything is appended).
        self.size, self.count = size, max(newlines - 1, 0)
        self.torn, self.open_line = torn and newlines > 0, torn and newlines == 0
        self.padding = 0
        self.measured = True

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

    def line_start(self) -> bytes:
        """What an append writes before its events: the newline an open last line lacks."""
        return b"\n" if self.open_line else b""

    def keep_fragment(self, padding: int) -> None:
        """Count the unterminated last line as a record: a read found it written whole, then
        *padding* bytes (see :func:`unpadded`)."""
        if self.torn:
            self.count += 1
            self.torn, self.open_line, self.padding = False, True, padding

    def cut_padding(self) -> None:
        """Cut off the bytes after an open last line, the next append's newline to end it."""
        if self.padding:
            os.ftruncate(self.fd, self.size - self.padding)
            self.size -= self.padding
            self.padding = 0

    def check_next(self, session_id: str, first_seq: int) -> StoreError | None:
        """Refuse an append that does not continue the stored log, as the other stores do."""
        if self.torn or first_seq != self.count:
            # A fragment counts as a record, as the loader counts it.
            return seq_conflict(session_id, self.count + self.torn, first_seq)
        return None

    def truncate(self, events: int) -> None:
        """Cut the file after the header and *events* events (a repair drops a torn tail)."""
        dropped = max(self.count - events, 0)
        if self.open_line and not dropped:
            keep = self.size - self.padding
        else:
            # An open last line is no line to after_last_lines: it goes with the lines before it.
            keep = after_last_lines(self.fd, self.size, dropped - self.open_line)
            self.open_line = False
        os.ftruncate(self.fd, keep)
        self.size = keep
        self.count -= dropped
        self.torn, self.padding = False, 0


def root_path(root: str | os.PathLike[str]) -> Path:
    """*root* as an absolute path, made once: a relative root would follow every change of
    working directory.

    Raises:
        ConfigError: ``INVALID_STORE_PATH`` for a path no directory has (one holding a
            NUL, or a character the file system's encoding cannot write) and for the
            empty path, which ``Path`` takes for the working directory.
    """
    refuse_unnamable(root, what="JSONLStore root")
    if not os.fspath(root):
        raise ConfigError(
            "JSONLStore needs a directory, not '': an empty path names none (pass '.' for "
            "the working directory)",
            code="INVALID_STORE_PATH",
        )
    return Path(root).absolute()


def open_temporary(path: Path) -> tuple[Path, int]:
    """Create and lock a temporary file beside *path*, under a name no other writer uses.

    ``O_EXCL`` and a random name: a writer never opens, let alone truncates, a
    file it did not create.
    """
    for _ in range(ATTEMPTS):
        temporary = _temporary_name(path)
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        if _lock_in_place(fd, temporary):
            return temporary, fd
    raise OSError(errno.EAGAIN, "no temporary file stayed in place to be locked", str(path))


def link_temporary(held: Path, path: Path) -> Path:
    """Link *held*, a file the caller holds locked, under a temporary name beside *path*.

    A name :func:`open_temporary` would choose, so a sweep knows it; the file
    being locked already, no sweep takes it between its link and a lock.
    Raises ``OSError`` (``EXDEV``) if *path* lies on another file system.
    """
    for _ in range(ATTEMPTS):
        temporary = _temporary_name(path)
        with contextlib.suppress(FileExistsError):
            os.link(held, temporary)
            return temporary
    raise OSError(errno.EEXIST, "every temporary name tried was taken", str(path))


def _temporary_name(path: Path) -> Path:
    """A random temporary name beside *path*, its creator's alone once made (``O_EXCL``, or a
    link, which never replaces a name)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(8)}{TEMPORARY_SUFFIX}")


def _lock_in_place(fd: int, path: Path) -> bool:
    """Lock *fd*; whether *path* still names it (closing it when not).

    A leftover sweep may lock and remove a temporary between its creation and
    its locking; the caller then makes another.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _names(path, fd):
            return True
    except BlockingIOError:
        pass
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return False


def lock_stored(fd: int, path: Path) -> bool:
    """Lock the session file open as *fd* for writing; whether *path* still names it.

    A file is removed only by its lock's holder, so one taken out (or replaced)
    between its opening and this lock is no longer the session's file: what is
    written to it would be lost with it. Raises ``BlockingIOError`` if another
    open file holds the lock.
    """
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return _names(path, fd)


def _markers_directory(root: Path) -> Path:
    """Where the creation markers of the store at *root* lie."""
    return root / MARKERS_DIRECTORY


def open_marker_temporary(root: Path, stem: str) -> tuple[Path, int]:
    """:func:`open_temporary` for a marker of the id stored as *stem* whose bucket is not
    known yet (a claim's), in the markers' directory, made first if missing."""
    path = _markers_directory(root) / stem
    try:
        return open_temporary(path)
    except FileNotFoundError:
        _make_markers_directory(path.parent)
        return open_temporary(path)


def mark_creation(temporary: Path, root: Path, stem: str) -> Path | None:
    """Link the locked *temporary* as the creation marker of the id stored as *stem*.

    Returns the marker, or ``None`` if a live writer is creating the id. One
    marker per id under the root, whatever the cwd, so of two writers only one
    can find the id absent and link it in. Being the writer's locked file, a
    marker costs no descriptor, and one a crash left behind is known by its
    lock being free, and replaced.
    """
    marker = _markers_directory(root) / f"{stem}{MARKER_SUFFIX}"
    for _ in range(ATTEMPTS):
        try:
            _link_marker(temporary, marker)
        except FileExistsError:
            if _held_else_removed(marker):
                return None
        else:
            return marker
    return None


def _link_marker(temporary: Path, marker: Path) -> None:
    """Link *temporary* as *marker*, making the markers' directory first if missing."""
    try:
        os.link(temporary, marker)
    except FileNotFoundError:
        # The temporary is held locked, so no sweep removed it: the directory is missing.
        _make_markers_directory(marker.parent)
        os.link(temporary, marker)


def _make_markers_directory(directory: Path) -> None:
    """Make the markers' directory, not synced: a marker lives no longer than its writer."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir()


def unmark_creation(marker: Path) -> None:
    """Remove a marker; call it while still holding the marker's lock, so it removes only its own."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(marker)


def remove_leftovers(root: Path) -> None:
    """Remove the temporary files and creation markers under *root* that no live writer holds.

    A writer holds its temporary's lock from creation until the file is linked
    in (and then as the session's own lock), so one whose lock is free was left
    by a crash. A lock works across processes and pid namespaces, where a pid
    in the name would not, and needs no guess at how long a write may take. A
    marker is another name of a temporary, so it would keep its data on disk.
    """
    # The buckets' temporaries, and the claims' (no bucket is known before a header is written).
    temporaries = root.glob(f"*/.*{TEMPORARY_SUFFIX}")
    markers = _markers_directory(root).glob(f"*{MARKER_SUFFIX}")
    # Earlier versions kept the claims' temporaries and every marker in the root itself.
    # (Their markers' pattern needs two dots: it never names the markers' directory.)
    in_root = (*root.glob(f".*{TEMPORARY_SUFFIX}"), *root.glob(f".*{MARKER_SUFFIX}"))
    for leftover in (*temporaries, *markers, *in_root):
        _held_else_removed(leftover)


def remove_held(path: Path, fd: int) -> None:
    """Remove *path* if it still names the file open as *fd*, whose lock the caller holds."""
    if _names(path, fd):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _held_else_removed(path: Path) -> bool:
    """Whether a live writer holds the file at *path*; if none does, remove it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        # Its holder may have removed it and another writer put a new file there.
        if _names(path, fd):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        return False
    finally:
        os.close(fd)


def _names(path: Path, fd: int) -> bool:
    return held_in_place(path, fd) is not None


def held_in_place(path: Path, fd: int) -> os.stat_result | None:
    """The status of the file *fd* holds if *path* names it, else ``None`` (moved, removed)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return None
    held = os.fstat(fd)
    return held if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino) else None


def make_directory(path: Path) -> None:
    """Create *path* and its missing parents, each synced into its parent before returning."""
    if path.is_dir():
        return
    make_directory(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        if not path.is_dir():
            # "File exists" would hide that the path is taken by something else.
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(path)) from None
    fsync_directory(path.parent)


def fsync_directory(path: Path) -> None:
    """Make the entries of directory *path* durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unpadded(line: bytes) -> bytes:
    """*line* without the padding after its last record's closing brace, if any."""
    return line.rstrip(_PADDING)


def read_whole(fd: int) -> bytes:
    """The whole file open as *fd*, from its start, leaving the descriptor's offset alone."""
    chunks: list[bytes] = []
    offset = 0
    # One read of the size it has now; a second to see the end (or what was appended since).
    while chunk := os.pread(fd, max(os.fstat(fd).st_size - offset, 1 << 16), offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def after_last_lines(fd: int, end: int, lines: int) -> int:
    """The offset where the last *lines* whole lines before *end* begin, 0 if it has fewer.

    Read backwards from *end*, so cutting off a log's tail reads only that tail
    (and the line before it), not the lines kept. A fragment after the last
    newline is no line: it lies past the offset returned.
    """
    wanted = lines + 1  # the newline that ends the line kept last
    size = 1 << 12
    while end > 0:
        start = max(end - size, 0)
        chunk = os.pread(fd, end - start, start)
        position = len(chunk)
        while (position := chunk.rfind(b"\n", 0, position)) >= 0:
            wanted -= 1
            if not wanted:
                return start + position + 1
        end = start
        size = min(size * 2, _CHUNK)
    return 0


def close_all(fds: Iterable[int]) -> None:
    """Close every descriptor of *fds*, going on past any that fails."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write all of *data* to *fd*: one ``os.write`` may write only part of it."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
