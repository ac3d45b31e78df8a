"""What the ``retinue`` command writes besides its results: text made safe to show, and
its error lines."""

from __future__ import annotations

import os
import sys

__all__ = ["complain", "discard_stdout", "printable"]

# C0, DEL and C1: a terminal acts on them (an escape sequence may retitle, clear or
# rewrite it), and stored text is a model's or a user's to choose, a provider's error
# text its server's.
_C0_C1 = (*range(0x20), *range(0x7F, 0xA0))
# Unicode's bidirectional controls (a terminal shows the text after one in another
# order than it is stored: "Trojan Source"), the line and paragraph separators, and
# characters shown as nothing (zero widths, word joiners, the byte order mark, the
# interlinear annotations and the tag block, which can hide a whole line of text). The
# zero-width joiners are left: emoji and many scripts need them.
_HIDDEN = (
    0x061C,
    0x200B,
    0x200E,
    0x200F,
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2060, 0x2070),
    0xFEFF,
    *range(0xFFF9, 0xFFFC),
    *range(0xE0000, 0xE0080),
)
_ESCAPES = {
    **{code: f"\\x{code:02x}" for code in _C0_C1},
    **{code: f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}" for code in _HIDDEN},
}


# An error's own lines (a server's detail under its message) stay lines.
_ERROR_ESCAPES = {code: escape for code, escape in _ESCAPES.items() if code not in (0x09, 0x0A)}


def printable(text: str) -> str:
    """*text* with its control, bidirectional and invisible characters written as escapes
    (``\\x1b``, ``\\u202e``), to show stored or received text as it is stored."""
    return text.translate(_ESCAPES)


def complain(line: str) -> None:
    """Write *line* to standard error, escaped as :func:`printable` escapes it but for its
    tabs and line breaks; nowhere when it is closed (``2>&-``).

    ``print(file=None)`` would write it to standard output, which may be piped to a
    parser and must carry the result only: the exit status alone then tells of the error.
    """
    stderr = sys.stderr
    if stderr is not None:
        # Escaped here, once: an error may quote a stored value (a malformed event's field).
        print(line.translate(_ERROR_ESCAPES), file=stderr)


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
