"""Reads of the JSONL store: finding a session's file, reading it whole, listing headers."""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

from retinue._errors import CorruptSessionError, StoreError
from retinue.session import SessionHeader
from retinue.session._codec import LongIntError, loads_line

from ._backend import Listing, SkippedSession, StoredLog
from ._common import parse_header, written_whole
from ._ids import file_stem
from ._jsonlfiles import SessionFile, read_whole, unpadded
from ._jsonlsteps import LeftFile, listed, opening

__all__ = ["SessionFileReads", "record_of"]


class SessionFileReads:
    """The reads of :class:`~retinue.stores._jsonl.JSONLBackend`, over the tables it keeps.

    Reads run beside the writer and take its lock only to look at a file it
    holds open: a claimed file not yet measured is read through its
    descriptor, and measured from what was read.
    """

    _root: Path
    _open: dict[str, SessionFile]
    """Open files of claimed sessions, by id."""
    _left: dict[str, LeftFile]
    """Files a failed creation linked in and could not remove, by id."""
    _lock: threading.RLock
    _closed: bool

    def _check_open(self) -> None:
        """Refuse a claim, write or delete that reaches a closed backend.

        One taken up would open and lock a session file that no close releases
        any more: every other store would find the session locked until exit.
        """
        if self._closed:
            raise StoreError(f"the JSONL store at {self._root} is closed", code="STORE_CLOSED")

    def _find(self, session_id: str) -> Path | None:
        # The file of a live session is where it was opened, unless removed since.
        handle = self._open.get(session_id)
        if handle is not None and handle.path.exists():
            return handle.path
        name = f"{file_stem(session_id)}.jsonl"
        for bucket in self._buckets_of(session_id):
            candidate = bucket / name
            if candidate.exists():
                return candidate
        return None

    def _stored(self, session_id: str) -> Path | None:
        """The session's file, unless it is one a failed creation left (no flush acknowledged it)."""
        path = self._find(session_id)
        # Looked up after the file was found: a write in another thread may leave it meanwhile.
        left = self._left.get(session_id)
        return None if left is not None and left.path == path else path

    def _only_stored(self, session_id: str) -> Path | None:
        """:meth:`_stored`, refused if another file of the id lies in another bucket too.

        One creation per id is marked across buckets, so a second file was put
        there by hand (a copy, a restore): which one is the session's log no
        file says, and taking the first listed would resume, repair and extend
        either, as the directory happens to list them. The one file reached
        from two buckets (a bucket linked to another, a hard link) is one log.
        """
        if session_id in self._open:
            return self._stored(session_id)
        name = f"{file_stem(session_id)}.jsonl"
        buckets = self._buckets_of(session_id)
        found = _distinct([bucket / name for bucket in buckets], listing=False)
        # Looked up after the files were found: a write in another thread may leave one meanwhile.
        left = self._left.get(session_id)
        files = [path for path in found if left is None or left.path != path]
        if len(files) > 1:
            raise _stored_twice(session_id, files)
        return files[0] if files else None

    def _buckets(self) -> list[Path]:
        if not self._root.is_dir():
            return []
        # Each entry's type from the listing, not a stat per entry. A bucket's name never starts
        # with a dot (``bucket_name``): the dot-names are the store's own (the creation markers'
        # directory, and the markers and temporaries an earlier version left in the root).
        with os.scandir(self._root) as entries:
            return [
                Path(entry.path)
                for entry in entries
                if not entry.name.startswith(".") and entry.is_dir()
            ]

    def _buckets_of(self, session_id: str) -> list[Path]:
        """:meth:`_buckets`, a failure to read the root *session_id*'s error (out of files, say)."""
        with opening(session_id, "the store's root directory"):
            return self._buckets()

    def read(self, session_id: str) -> StoredLog | None:
        """The header and complete event lines.

        A file claimed but not yet measured (a load's) is read through its
        descriptor, and measured from what was read: a load reads its file once.
        """
        read = self._read_bytes(session_id)
        if read is None:
            return None
        content, path, handle = read
        parts = content.split(b"\n")
        torn = self._torn_fragment(session_id, handle, content, parts)
        # A header with no newline yet is no fragment after the records: there are none.
        torn = torn and len(parts) > 1
        header = _header_at(path, parts[0], session_id)
        records = parts[1:-1]
        # A last line lacking only its newline (a hand edit, or a crash cut just that, or left
        # padding in its place) is a record to every reader, refused as any other if out of
        # seq order; the writer ends it before its next append, if it is the next event's.
        last = unpadded(parts[-1])
        if len(parts) > 1 and last and written_whole(last):
            self._keep_fragment(session_id, last, len(parts[-1]) - len(last))
            records, torn = [*parts[1:-1], last], False
        locate = functools.partial(_event_line, path)
        return StoredLog(header, records, torn_fragment=torn, locate=locate)

    def _keep_fragment(self, session_id: str, line: bytes, padding: int) -> None:
        """Count a last *line* written whole, then *padding* bytes, as a record of the file
        held here, if it is the next event's: the loader refuses any other, out of seq order."""
        with self._lock:
            held = self._open.get(session_id)
            if held is not None and held.measured and record_of(line, held.count):
                held.keep_fragment(padding)

    def _torn_fragment(
        self, session_id: str, handle: SessionFile | None, content: bytes, parts: list[bytes]
    ) -> bool:
        """Whether the unterminated last line of *content*, if any, is a torn fragment.

        Only in a file claimed here that its measure says ends torn: no write
        follows a fragment until a repair cuts it off. In any other file it may
        be a write still under way, a live writer's in this process or another:
        not yet written, so left out and not reported (R11.8).
        """
        unterminated = parts[-1] != b""
        if handle is None and (not unterminated or session_id not in self._open):
            return False  # reads run beside the writer, without its lock, when they can
        with self._lock:
            held = self._open.get(session_id)
            # Unmeasured still, nothing wrote to the file since it was locked: what was read is it.
            if handle is not None and held is handle and not handle.measured:
                handle.take_measure(len(content), len(parts) - 1, torn=unterminated)
            if held is None or not held.measured:
                return False
            return unterminated and (held.torn or held.open_line)

    def _read_bytes(self, session_id: str) -> tuple[bytes, Path, SessionFile | None] | None:
        """The session's bytes and file, with its handle if they are to measure it;
        ``None`` if not stored."""
        unmeasured = self._unmeasured(session_id)
        if unmeasured is None:
            path = self._only_stored(session_id)
            try:
                return None if path is None else (path.read_bytes(), path, None)
            except FileNotFoundError:
                return None  # gone since it was found: a failed creation taken out again
        handle, fd = unmeasured
        try:
            return read_whole(fd), handle.path, handle
        finally:
            os.close(fd)

    def _unmeasured(self, session_id: str) -> tuple[SessionFile, int] | None:
        """A claimed file not yet measured, and a descriptor of it of the caller's own."""
        if session_id not in self._open:
            return None  # a session not claimed here takes no lock
        with self._lock:
            handle = self._open.get(session_id)
            if handle is None or handle.measured:
                return None
            # Duplicated under the lock: a release meanwhile must not close what is read.
            return handle, os.dup(handle.fd)

    def listing(self) -> Listing:
        """Read only the first line of each session file (R11.14), but of no file left behind.

        A file whose first line cannot be read or parsed, names a session
        stored under another file name or holds a format version this build
        does not read, is skipped with its problem; so is an id whose file lies
        in two buckets, as its load is refused.
        """
        found = [path for bucket in self._buckets() for path in _session_files(bucket)]
        # Copied in one step, after the listing: reads run beside the writer, without its lock.
        left = {held.path for held in self._left.copy().values()}
        by_name: dict[str, list[Path]] = {}
        for path in found:
            if path not in left:
                by_name.setdefault(path.name, []).append(path)
        kept = [_listed_once(paths) for paths in by_name.values()]
        return Listing(
            tuple(entry for entry in kept if isinstance(entry, SessionHeader)),
            tuple(entry for entry in kept if isinstance(entry, SkippedSession)),
        )

    def contains(self, session_id: str) -> bool:
        """Whether a file for the session exists in any bucket, other than one left behind."""
        return self._stored(session_id) is not None


def record_of(line: bytes, seq: int) -> bool:
    """Whether *line*, unterminated, is event *seq*'s record written whole (padding after it
    left out).

    Only after such a line may an append follow: a load reads any whole line as
    a record and refuses one out of seq order, with every append after it.
    """
    try:
        record = loads_line(unpadded(line))
    except (LongIntError, ValueError, RecursionError):
        return False
    return isinstance(record, dict) and type(record.get("seq")) is int and record["seq"] == seq


def _listed_once(paths: list[Path]) -> SessionHeader | SkippedSession | None:
    """The listing of the files of one name across buckets: the entry of its one file, or
    a skip naming them all. One file reached from two buckets (a linked bucket) is one."""
    files = _distinct(paths, listing=True) if len(paths) > 1 else paths
    kept = [(path, entry) for path in files if (entry := listed(path)) is not None]
    if len(kept) < 2:
        return kept[0][1] if kept else None
    named = [entry.id for _, entry in kept if isinstance(entry, SessionHeader)]
    session_id = named[0] if named else kept[0][0].stem
    problem = _stored_twice(session_id, [path for path, _ in kept]).message
    return SkippedSession(str(min(path for path, _ in kept)), problem)


def _session_files(bucket: Path) -> list[Path]:
    """The session files in *bucket*, none if it is gone (a bucket removed since it was listed)."""
    try:
        return list(bucket.glob("*.jsonl"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _distinct(paths: list[Path], *, listing: bool) -> list[Path]:
    """*paths* less any naming the same file as one before it, or no file.

    A path it cannot look at (a bucket this user may not search) stays in a
    *listing*, whose read of the file names the fault; a load raises the
    fault, which counting it would make a second copy of the session.
    """
    files: dict[object, Path] = {}
    for path in paths:
        try:
            status = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            if not listing:
                raise
            files[path] = path
            continue
        files.setdefault((status.st_dev, status.st_ino), path)
    return list(files.values())


def _stored_twice(session_id: str, paths: list[Path]) -> CorruptSessionError:
    """The refusal of an id stored in the files at *paths*, in more than one bucket."""
    named = ", ".join(str(path) for path in sorted(paths))
    return CorruptSessionError(
        f"session {session_id!r} is stored in {len(paths)} files: {named}; "
        "keep its log and remove the others",
        code="CORRUPT_SESSION",
    )


def _header_at(path: Path, line: bytes, session_id: str) -> SessionHeader:
    """The header on the first line of the file at *path*; a refusal names the file and line."""
    try:
        return parse_header(line, session_id)
    except CorruptSessionError as exc:
        raise CorruptSessionError(f"{path}, line 1: {exc.message}", code=exc.code) from exc


def _event_line(path: Path, index: int) -> str:
    """Where event record *index* of the file at *path* lies: after the header line
    (which is record -1)."""
    return f"{path}, line {index + 2}"
