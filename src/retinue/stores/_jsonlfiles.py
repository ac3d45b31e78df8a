"""File steps of the JSONL store: temporaries, creation locks, durable directories, leftovers.

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
from pathlib import Path

__all__ = [
    "fsync_directory",
    "make_directory",
    "mark_creation",
    "open_temporary",
    "remove_leftovers",
    "unmark_creation",
]

TEMPORARY_SUFFIX = ".tmp"
MARKER_SUFFIX = ".creating"
_ATTEMPTS = 8
"""Retries of a name another writer removed or took in between (a race, not a polling loop)."""


def open_temporary(path: Path) -> tuple[Path, int]:
    """Create and lock a temporary file beside *path*, under a name no other writer uses.

    ``O_EXCL`` and a random name: a writer never opens, let alone truncates, a
    file it did not create.
    """
    for _ in range(_ATTEMPTS):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}{TEMPORARY_SUFFIX}")
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        if _lock_in_place(fd, temporary):
            return temporary, fd
    raise OSError(errno.EAGAIN, "no temporary file stayed in place to be locked", str(path))


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


def mark_creation(temporary: Path, root: Path, stem: str) -> Path | None:
    """Link the locked *temporary* as the creation marker of the id stored as *stem*.

    Returns the marker, or ``None`` if a live writer is creating the id. One
    marker per id under the root, whatever the cwd, so of two writers only one
    can find the id absent and link it in. Being the writer's locked file, a
    marker costs no descriptor, and one a crash left behind is known by its
    lock being free, and replaced.
    """
    marker = root / f".{stem}{MARKER_SUFFIX}"
    for _ in range(_ATTEMPTS):
        try:
            os.link(temporary, marker)
        except FileExistsError:
            if _held_else_removed(marker):
                return None
        else:
            return marker
    return None


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
    for leftover in (*root.glob(f"*/.*{TEMPORARY_SUFFIX}"), *root.glob(f".*{MARKER_SUFFIX}")):
        _held_else_removed(leftover)


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
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def make_directory(path: Path) -> None:
    """Create *path* and its missing parents, each synced into its parent before returning."""
    if path.is_dir():
        return
    make_directory(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        if not path.is_dir():
            raise  # a file where the directory should be
    fsync_directory(path.parent)


def fsync_directory(path: Path) -> None:
    """Make the entries of directory *path* durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
