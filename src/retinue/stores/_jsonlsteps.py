"""The JSONL backend's records and single-file steps, which need none of its state.

Where a session's file lives; what one group commit touched, to sync and undo
it; a new session's file and a file a failed group could not remove; and the
steps on one file: opening it, discarding a new one, reading its header for a
listing, refusing an append after its unterminated last line. The backend's tables (open files, known paths, held leftovers) stay in
:class:`~retinue.stores._jsonl.JSONLBackend`.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from pathlib import Path

import attrs

from retinue._errors import CorruptSessionError, StoreError
from retinue.session import SessionHeader

from ._backend import SkippedSession
from ._common import cannot_open, listed_header, written_whole
from ._ids import bucket_name, escape_id, file_stem, unescape_id
from ._jsonlfiles import SessionFile, after_last_lines, close_all, unmark_creation, unpadded

__all__ = [
    "Group",
    "LeftFile",
    "NewFile",
    "after_torn_line",
    "discard",
    "listed",
    "opening",
    "session_path",
    "syncfs_function",
    "unterminated_line",
]


def session_path(root: str | os.PathLike[str], header: SessionHeader) -> Path:
    """Where a session lives: ``root/<bucket of cwd>/<escaped id>.jsonl`` (R11.12).

    An id whose escaped form would not fit a file name is shortened with a hash
    (:func:`file_stem`).
    """
    return Path(root) / bucket_name(header.cwd) / f"{file_stem(header.id)}.jsonl"


@attrs.define(eq=False)
class NewFile:
    """A new session's file a group writes under its temporary name, linked in after the sync."""

    batch_index: int
    session_id: str
    temporary: Path
    path: Path
    fd: int
    count: int
    marker: Path | None
    """The id's creation marker, removed once linked in or undone, before the file is closed."""
    borrowed: bool = False
    """Whether the file is the id's claim's (its marker's): the claim keeps its descriptor,
    which no discard closes, until the group commits and the session's open file takes it."""
    size: int = 0
    linked: bool = False

    def unmark(self) -> None:
        """Remove the id's creation marker, if it is still there."""
        if self.marker is not None:
            unmark_creation(self.marker)
            self.marker = None


@attrs.frozen
class LeftFile:
    """A new session's file a failed group linked in and could not remove again.

    Complete, maybe durable, but nobody was told it is stored. Held locked so
    no other writer takes it up, until the id's next creation (the flush's
    retry) or the backend's ``close`` removes it. Its holder's reads pass it
    over; a restarted process, with no holder left, loads it as a crash's file.
    """

    path: Path
    fd: int
    marker: Path | None = None
    """The id's creation marker, if the file is its claim's: another name of the file, held
    with it so the claim keeps the id out, and given back to the claim by the retry."""


@attrs.define(eq=False)
class Group:
    """What one group commit touched, to sync it and to undo it on failure."""

    index: int = 0
    touched: list[int] = attrs.Factory(list)
    rollbacks: list[tuple[SessionFile, int, int, bool]] = attrs.Factory(list)
    """Each file appended to, with its size, event count and open last line before the group."""
    new: list[NewFile] = attrs.Factory(list)
    directories: set[Path] = attrs.Factory(set)
    """The buckets of the new files, synced once they are linked in."""
    reserve: int = -1
    """A descriptor held from the group's first new temporary on and closed before its
    directories are opened (one at a time), so the temporaries cannot leave none for them."""

    def free_reserve(self) -> None:
        """Close the reserved descriptor, if held, for the directories' syncs to use."""
        if self.reserve >= 0:
            close_all([self.reserve])
            self.reserve = -1


def syncfs_function() -> ctypes._NamedFuncPointer | None:
    """The C library's ``syncfs``, or None where there is none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    return getattr(libc, "syncfs", None)


def listed(path: Path) -> SessionHeader | SkippedSession | None:
    """The header of the session file at *path*, why it cannot be listed, or ``None`` if gone.

    A file whose name no session id escapes to, or a link to no file, is
    skipped so named: no load of any id finds it.
    """
    if not _session_name(path.stem):
        problem = "its name is no session id's escaped file name, so no load finds it"
        return SkippedSession(str(path), f"{path}: {problem}")
    try:
        with path.open("rb") as file:
            line = file.readline()
    except (FileNotFoundError, NotADirectoryError):
        with contextlib.suppress(OSError):  # the link itself gone since: as below
            problem = f"a link to {os.readlink(path)}, which is no file"
            return SkippedSession(str(path), f"{path}: {problem}")
        # Gone since the listing: a failed creation taken out again, or its bucket with it.
        return None
    except OSError as exc:
        return SkippedSession(str(path), f"{path}: cannot read its header: {exc.strerror or exc}")
    try:
        return listed_header(line, path.stem, file_stem)
    except CorruptSessionError as exc:
        return SkippedSession(str(path), f"{path}: {exc.message}")


def _session_name(stem: str) -> bool:
    """Whether *stem* is some id's :func:`file_stem`: its escape, or an escape's start, ``~~``
    and a digest."""
    # The last "~~": an escape's start cut inside an escape ("~00E9" cut to "~") meets it.
    _, hashed, digest = stem.rpartition("~~")
    if hashed:
        return len(digest) == 64 and all(char in "0123456789abcdef" for char in digest)
    try:
        return escape_id(unescape_id(stem)) == stem
    except (ValueError, UnicodeDecodeError):
        return False


@contextlib.contextmanager
def opening(session_id: str, what: str = "its file") -> Iterator[None]:
    """Make a failure to open a session's file (or *what* else its lookup opens) that
    session's error, not its group's."""
    try:
        yield
    except OSError as exc:
        raise cannot_open(session_id, what, exc, "JSONL") from exc


def discard(new: NewFile) -> None:
    """Remove a new session's temporary file and marker, then close it (dropping their lock).

    A claim's file stays open, its marker held, for the claim to keep the id."""
    with contextlib.suppress(OSError):
        os.unlink(new.temporary)
    with contextlib.suppress(OSError):
        new.unmark()
    if new.borrowed:
        with contextlib.suppress(OSError):
            os.ftruncate(new.fd, 0)  # a failed group's bytes: no disk space held for them
        new.fd = -1
    if new.fd >= 0:
        with contextlib.suppress(OSError):
            os.close(new.fd)
        new.fd = -1


def unterminated_line(handle: SessionFile) -> bytes:
    """The line after the last newline of *handle*'s file, read back from its end."""
    start = after_last_lines(handle.fd, handle.size, 0)
    return os.pread(handle.fd, handle.size - start, start)


def after_torn_line(session_id: str, handle: SessionFile) -> StoreError:
    """The refusal of an append after a line a crash cut short, naming the file and line.

    A line that parses whole was put there by hand, out of seq order (the writer
    counted the next event's): no load cuts it off, it refuses it.
    """
    where = f"session {session_id!r}: {handle.path}, line {handle.count + 2}"
    try:
        whole = written_whole(unpadded(unterminated_line(handle)))
    except OSError:
        whole = False  # the refusal stands; only its words are the crash's
    if whole:
        return StoreError(
            f"{where} is a record written whole that is not event {handle.count}'s, or that "
            "this version cannot read: nothing is appended after it, and a load refuses it",
            code="SEQ_CONFLICT",
        )
    return StoreError(
        f"{where} is a write a crash cut short (no committed event): nothing is appended "
        "after it until a load of the session cuts it off",
        code="SEQ_CONFLICT",
    )
