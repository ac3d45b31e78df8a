"""What the ``retinue`` command writes besides its results: text made safe to show, and
its error lines."""

from __future__ import annotations

import os
import sys

__all__ = ["complain", "discard_stdout", "printable"]

# C0, DEL and C1: a terminal acts on them (an escape sequence may retitle, clear or
# rewrite it), and stored text is a model's or a user's to choose, a provider's error
# text its server's.
_CONTROLS: dict[int, str] = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}
# Bidirectional overrides, embeddings and isolates: a terminal shows the text after one
# in another order than it is stored ("Trojan Source"), so a log could read as it is not.
_CONTROLS.update(
    {
        code: f"\\u{code:04x}"
        for code in (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
    }
)


def printable(text: str) -> str:
    """*text* with its control characters written as escapes (``\\x1b``), to show stored
    or received text."""
    return text.translate(_CONTROLS)


def complain(line: str) -> None:
    """Write *line* to standard error; nowhere when it is closed (``2>&-``).

    ``print(file=None)`` would write it to standard output, which may be piped to a
    parser and must carry the result only: the exit status alone then tells of the error.
    """
    stderr = sys.stderr
    if stderr is not None:
        print(line, file=stderr)


def discard_stdout() -> None:
    """Send what standard output holds, and whatever is written to it from now on,
    nowhere: it cannot be written, and the interpreter's final flush must not fail.

    A stream that is no file's (replaced in-process) is left as it is.
    """
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # None, or io.UnsupportedOperation
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, descriptor)
    finally:
        os.close(devnull)
