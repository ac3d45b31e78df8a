"""The text ``sessions import`` stores: a file's, or standard input's when the file is ``-``."""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import trio

from retinue._errors import CorruptSessionError

__all__ = ["STANDARD_STREAM", "read_import"]

STANDARD_STREAM = "-"
"""The file name that stands for standard input (import) or standard output (export)."""

STANDARD_INPUT = "<stdin>"
"""How the errors name the text read from standard input."""


async def read_import(file: str) -> tuple[str, str]:
    """The UTF-8 text of *file*, or of standard input when it is ``-``, and its name
    for the errors to give.

    Raises:
        CorruptSessionError: the text is no UTF-8.
        OSError: *file* cannot be read, or standard input is closed.
    """
    if file == STANDARD_STREAM:
        if sys.stdin is None:  # started with it closed (``<&-``)
            raise OSError(errno.EBADF, "cannot read the session: standard input is closed")
        read, source = _standard_input_reader(sys.stdin), STANDARD_INPUT
    else:
        read, source = Path(file).read_bytes, file
    # Left behind on Ctrl-C: a terminal's read would otherwise hold the command until the
    # line ends, and a FIFO's open (``import <(command)``) until a writer comes, the
    # interrupt waiting for them. A read changes nothing, so nothing is left undone.
    data = await trio.to_thread.run_sync(read, abandon_on_cancel=True)
    try:
        # Read as a text file is, its line endings (\r\n, \r) made \n alike.
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read(), source
    except UnicodeDecodeError as exc:
        raise _not_utf8(source, data, exc) from exc


def _standard_input_reader(stdin: TextIO) -> Callable[[], bytes]:
    """Read *stdin* (standard input) to its end through a stream of the read's own.

    The read may be left behind on Ctrl-C, and the interpreter closes ``sys.stdin`` as it
    exits: that close would wait for the lock a read of ``sys.stdin.buffer`` holds, and
    Python aborts (``could not acquire lock ... at interpreter shutdown``). A stream
    replaced in-process (a test's) has no descriptor and is read as it is.
    """
    try:
        descriptor = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return stdin.buffer.read

    def read() -> bytes:
        with open(os.dup(descriptor), "rb") as stream:
            return stream.read()

    return read


def _not_utf8(source: str, data: bytes, error: UnicodeDecodeError) -> CorruptSessionError:
    """The refusal of *data*, naming the line of its first byte that is no UTF-8."""
    # The bytes before it decode; its line is counted as the text is split (\r\n, \r, \n).
    before = data[: error.start].decode("utf-8", errors="replace")
    line = len(before.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    return CorruptSessionError(f"{source}, line {line}: not UTF-8 text: {error.reason}")
