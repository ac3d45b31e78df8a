"""Reading a configuration file: its bytes, bounded, as a TOML document (SPEC 13).

Every way the file can fail to read (missing, too large, not UTF-8, not TOML)
is a :class:`~retinue.ConfigError` naming the file.
"""

from __future__ import annotations

import codecs
import os
import re
import tomllib
from typing import Any

from retinue._checks import unnamable_path
from retinue._errors import ConfigError
from retinue._lossless import shown_short

__all__ = ["MAX_CONFIG_BYTES", "read_toml"]


MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""The largest configuration file read: thousands of entries take a fraction of it."""


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The TOML document of the file *path*; a ConfigError naming it when it cannot be read."""
    where = os.fsdecode(path)  # a path-like may give bytes
    if not where:  # an unset variable, say: the message would name no file at all
        raise ConfigError("cannot read configuration: the path is empty")
    problem = unnamable_path(where)
    if problem is not None:  # open() would raise a bare ValueError or UnicodeEncodeError
        raise ConfigError(f"cannot read configuration {where!r}: the path {problem}")
    data = _bounded_bytes(path, where)
    if data.startswith(codecs.BOM_UTF8):
        # Some editors save one; the TOML reader would report an invalid statement at 1:1.
        raise ConfigError(
            f"invalid TOML in {where}: the file starts with a byte order mark (U+FEFF), "
            "which TOML does not allow: save it as UTF-8 without one"
        )
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"invalid TOML in {where}: {_undecodable(data, exc)}") from exc
    return _parsed(text, where)


def _undecodable(data: bytes, exc: UnicodeDecodeError) -> str:
    """Where *data* stops being UTF-8, by line and column as a TOML syntax error names it.

    The codec counts bytes from the start of the file, a place no editor shows.
    """
    line = data.count(b"\n", 0, exc.start) + 1
    line_start = data.rfind(b"\n", 0, exc.start) + 1
    # Characters, as the TOML reader counts columns: every byte before the bad one decoded.
    column = len(data[line_start : exc.start].decode()) + 1
    return (
        f"not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, column {column}: "
        f"{exc.reason})"
    )


def _bounded_bytes(path: str | os.PathLike[str], where: str) -> bytes:
    """The bytes of the file *path* (named *where*), refused past :data:`MAX_CONFIG_BYTES`."""
    try:
        with open(path, "rb") as file:
            # Read up to a bound: a device or pipe given by mistake (/dev/zero) never ends,
            # and would be read until memory ran out.
            data = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot read configuration {where}: {reason}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"cannot read configuration {where}: larger than {MAX_CONFIG_BYTES} bytes, "
            "more than any configuration holds"
        )
    return data


def _parsed(text: str, where: str) -> dict[str, Any]:
    """The TOML document *text* of the file *where*."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problem = f"invalid TOML in {where}: {_syntax_problem(text, exc)}"
        raise ConfigError(problem + _other_format(where)) from exc
    except ValueError as exc:
        # Raised past the reader's own checks: an integer of more digits than int()
        # converts (sys.get_int_max_str_digits(), 4300 by default).
        raise ConfigError(f"invalid TOML in {where}: a value cannot be read: {exc}") from exc
    except RecursionError as exc:
        # tomllib reads nested arrays and inline tables recursively, with no bound of its own.
        raise ConfigError(f"invalid TOML in {where}: nested too deeply to read") from exc


_OTHER_FORMATS = {".json": "JSON", ".yaml": "YAML", ".yml": "YAML"}


def _other_format(where: str) -> str:
    """A hint for a file its name says is in another format than TOML, else ``""``."""
    kind = _OTHER_FORMATS.get(os.path.splitext(where)[1].lower())
    if kind is None:
        return ""
    return (
        f" (load_config reads TOML only: for {kind}, parse what the file holds and give the "
        "mapping to parse_config)"
    )


_POSITION = re.compile(r"\(at (?:line (\d+), column \d+|end of document)\)$")
"""Where the TOML reader's message says it stopped: a line and column, or the end."""


def _syntax_problem(text: str, exc: tomllib.TOMLDecodeError) -> str:
    """The reader's message for *text*, quoting the line it stopped on.

    The reader names a key given twice only by a position ("Cannot overwrite a
    value"), and a problem it finds on a last line without a newline only as
    "at end of document": the line's text names the key, and its number where
    to look.
    """
    message = str(exc)
    position = _POSITION.search(message)
    if position is None:
        return message
    # Split as the reader counts lines: at "\n" only (a comment may hold a U+2028).
    lines = text.split("\n")
    if position.group(1) is not None:
        number = int(position.group(1))
        where = ""
    else:  # the end: the last line holding anything is where the reader stopped
        filled = [index for index, line in enumerate(lines, 1) if line.strip()]
        if not filled:
            return message
        number = filled[-1]
        where = f", line {number}"
    if number > len(lines):
        return message
    quoted = shown_short(lines[number - 1].strip())
    return f"{message[: position.end() - 1]}{where}: {quoted})"
