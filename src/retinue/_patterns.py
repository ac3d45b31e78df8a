"""A JSON Schema ``pattern`` read with Python's ``re``: its ``$`` ends the text.

JSON Schema's regular expressions (ECMA-262) match ``$`` only at the end of
the text, where Python's ``$`` also matches before a final newline:
``^[a-z]+$`` would take ``"main\\n"``, a newline slipped into a command or a
path. :func:`ending_at_text_end` writes each such anchor as ``\\Z``, reading
the pattern as Python's parser does, inline flags included.
"""

from __future__ import annotations

import re

__all__ = ["ending_at_text_end"]

# ``(?flags)``, ``(?flags:``, ``(?-flags:``, ``(?flags-flags:``; a bare ``(?:`` too.
_FLAG_GROUP = re.compile(r"\(\?([aiLmsux]*)(?:-([imsx]*))?([:)])")


def ending_at_text_end(pattern: str) -> str:
    """*pattern* with each ``$`` anchor matching only at the end of the text.

    Only a ``$`` that means the end is rewritten: not one escaped (``\\$``),
    in a character class, in a ``(?#...)`` comment or, under the verbose flag
    ``x``, in a ``#`` comment, nor one under the multiline flag ``m``
    (``(?m)``, ``(?m:...)``), where ``$`` ends each line by the pattern's own
    choice. Inline flags, global or scoped, are read where they apply. A
    pattern ``re`` cannot compile is returned as it is.
    """
    try:
        flags = re.compile(pattern).flags
    except (re.error, OverflowError, RecursionError):
        return pattern
    return "".join(_Reader(pattern, flags).pieces())


class _Reader:
    """One pass over a pattern that compiles, tracking the flags in force at each point."""

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern = pattern
        # (multiline, verbose) in force in each open group, the whole pattern's first.
        self.scopes = [(bool(flags & re.MULTILINE), bool(flags & re.VERBOSE))]

    def pieces(self) -> list[str]:
        pattern, at = self.pattern, 0
        out: list[str] = []
        while at < len(pattern):
            char = pattern[at]
            multiline, verbose = self.scopes[-1]
            if char == "\\":
                end = at + 2
            elif char == "[":
                end = _class_end(pattern, at)
            elif char == "(":
                end = self._group_start(at)
            elif char == ")":
                if len(self.scopes) > 1:
                    self.scopes.pop()
                end = at + 1
            elif char == "#" and verbose:
                end = _skip_to(pattern, at + 1, "\n")
            elif char == "$" and not multiline:
                out.append("\\Z")
                at += 1
                continue
            else:
                end = at + 1
            out.append(pattern[at:end])
            at = end
        return out

    def _group_start(self, at: int) -> int:
        """Where the opening of the group at *at* ends, its scope entered (none for global flags)."""
        if self.pattern.startswith("(?#", at):
            return _skip_to(self.pattern, at + 3, ")")
        multiline, verbose = self.scopes[-1]
        found = _FLAG_GROUP.match(self.pattern, at)
        if found is None:
            self.scopes.append((multiline, verbose))
            return at + 1
        on, off, close = found.group(1), found.group(2) or "", found.group(3)
        if close == ":":
            self.scopes.append(
                (
                    ("m" in on or multiline) and "m" not in off,
                    ("x" in on or verbose) and "x" not in off,
                )
            )
        # Global flags, ``(?i)``: already in the compiled pattern's flags, from its start.
        return found.end()


def _class_end(pattern: str, at: int) -> int:
    """Where the character class opened at *at* ends (past its ``]``)."""
    index = at + 1
    if pattern.startswith("^", index):
        index += 1
    if pattern.startswith("]", index):
        index += 1  # first in the class, "]" is a literal, not its end
    return _skip_to(pattern, index, "]")


def _skip_to(pattern: str, index: int, stop: str) -> int:
    """Past the first *stop* from *index* on, each escape read whole as ``re`` reads it."""
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        index += 1
        if char == stop:
            break
    return index
