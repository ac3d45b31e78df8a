"""Keep ``sessions export --output`` from writing over the store it reads."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

__all__ = ["refuse_store_overwrite"]

_SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")
"""The files of a SQLite database: itself and those its journal modes keep beside it."""


def refuse_store_overwrite(kind: str, location: str, output: str) -> None:
    """Refuse an *output* file that is the file store's own, or lies in its directory.

    Written, the export would replace a SQLite database with JSONL, or a JSONL log with
    another session's: a command that only reads would destroy what it read.

    Raises:
        argparse.ArgumentTypeError: *output* names the store's database (or a file of
            its journal) or a file inside its JSONL directory.
    """
    target = Path(os.path.realpath(output))
    if kind == "sqlite":
        if any(_same_file(target, Path(location + suffix)) for suffix in _SQLITE_COMPANIONS):
            raise argparse.ArgumentTypeError(
                f"--output {output!r} is the sqlite store {location!r} itself"
            )
    elif kind == "jsonl" and (
        target.is_relative_to(os.path.realpath(location))
        or any(_same_file(target, log) for log in _session_files(target, location))
    ):
        raise argparse.ArgumentTypeError(
            f"--output {output!r} lies inside the jsonl store {location!r} (or is a link to "
            "one of its files)"
        )


def _session_files(target: Path, location: str) -> list[Path]:
    """The JSONL store's session files, when *target* exists to be a hard link to one."""
    return list(Path(location).rglob("*.jsonl")) if target.exists() else []


def _same_file(target: Path, store_file: Path) -> bool:
    """Whether *target* is *store_file*: by path, or a hard link to it."""
    if target == Path(os.path.realpath(store_file)):
        return True
    try:
        return target.samefile(store_file)
    except OSError:  # either one does not exist
        return False
