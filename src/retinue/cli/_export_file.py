"""The file ``sessions export --output`` writes, waited on in trio so Ctrl-C ends the wait."""

from __future__ import annotations

import errno
import os
import stat
import sys

import trio

__all__ = ["write_output"]

_RETRY = 0.1
"""Seconds between attempts to open a file that cannot be opened for writing yet."""


async def write_output(output: str, text: str) -> None:
    """Write *text* as UTF-8 to the file *output*, created or emptied as ``open(output,
    "w")`` does (a hard link stays one).

    A FIFO (or a pipe reached as ``/dev/stdout``) is opened once it has a reader,
    and written as fast as its reader takes it; a file another process holds a
    lease on, once the lease is given up. A plain open or write would wait for
    them in the OS, holding Ctrl-C back until then.
    """
    if sys.platform == "win32":  # no FIFO waits there, and no O_NONBLOCK to open one with
        await trio.Path(output).write_text(text, encoding="utf-8")
        return
    descriptor = await _opened(output)
    try:
        await _write_all(descriptor, text.encode("utf-8"))
    finally:
        os.close(descriptor)


async def _opened(output: str) -> int:
    """A non-blocking descriptor of *output*, opened for writing once it may be."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NONBLOCK
    while True:
        await trio.lowlevel.checkpoint()
        try:
            return os.open(output, flags, 0o666)
        except BlockingIOError:
            pass  # a lease on the file, which the attempt asked its holder to give up
        except OSError as exc:
            # Non-blocking, a FIFO's open fails ENXIO while no reader has it open.
            if exc.errno != errno.ENXIO or not _is_fifo(output):
                raise
        # trio has no wait for either, so the open is tried again until it goes through.
        await trio.sleep(_RETRY)


def _is_fifo(output: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(output).st_mode)
    except OSError:
        return False


async def _write_all(descriptor: int, data: bytes) -> None:
    """Write all of *data*; a pipe or terminal that is full is waited on until it takes more."""
    await trio.lowlevel.checkpoint()
    rest = memoryview(data)
    while rest:
        try:
            written = os.write(descriptor, rest)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(descriptor)
        else:
            rest = rest[written:]
