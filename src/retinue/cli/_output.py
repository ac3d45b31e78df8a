"""What the ``retinue`` command writes besides its results: text made safe to show, and
its error lines."""

from __future__ import annotations

import sys

__all__ = ["complain", "printable"]

# C0, DEL and C1: a terminal acts on them (an escape sequence may retitle, clear or
# rewrite it), and stored text is a model's or a user's to choose, a provider's error
# text its server's.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}


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
