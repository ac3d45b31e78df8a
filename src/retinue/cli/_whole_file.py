"""Write a command's output file whole or not at all."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

__all__ = ["write_whole"]


def write_whole(output: str, text: str) -> None:
    """Write *text* to the file *output* as UTF-8, all of it or none of it.

    Written in place, a write that failed part way (a full disk, a file size
    limit) left the file cut off mid-line, and whatever it held before gone.
    So *text* goes to a new file beside it, which then takes its name; a
    link is followed, so the file it names is the one replaced. A device
    or a pipe (``/dev/stdout``) has no contents to keep and is written as
    it is, as is a file whose directory takes no new file.

    Raises:
        OSError: the file could not be written; but for a device, a pipe or
            a file written in place, it is as it was.
    """
    target = os.path.realpath(output)
    try:
        kept = os.stat(target)
    except FileNotFoundError:
        kept = None
    if kept is not None and not stat.S_ISREG(kept.st_mode):
        _write_in_place(target, text)
        return
    directory, name = os.path.split(target)
    partial = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.partial")
    try:
        # Created with the mode a new file gets (the umask applies); a replaced one's below.
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError:
        _write_in_place(target, text)
        return
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            # On disk before it takes the name: a crash then leaves the old file or the new one.
            os.fsync(file.fileno())
        if kept is not None:
            os.chmod(partial, stat.S_IMODE(kept.st_mode))
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def _write_in_place(target: str, text: str) -> None:
    with open(target, "w", encoding="utf-8") as file:
        file.write(text)
