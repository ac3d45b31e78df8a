"""The demo's closing hint: the command that lists the sessions it stored, to paste."""

from __future__ import annotations

import shlex
import string
import unicodedata

from ._output import printable

__all__ = ["closing_hint", "shell_word", "without_password"]


def closing_hint(spec: str) -> str:
    """The line naming the store *spec* and the command that lists its sessions."""
    # The command stays on one line to paste into a shell, even piped, quoted when the
    # path has spaces or glob characters, and given as its bytes when it holds a
    # control character or is no UTF-8.
    store = without_password(spec)
    command = f"retinue sessions list --store {shell_word(store)}"
    return f"sessions stored in {printable(store)}: try `{command}`"


def shell_word(text: str) -> str:
    """*text* quoted as one word for a POSIX shell, to paste on one line.

    Quoted as ``shlex.quote`` does, unless it holds a control character or
    a byte no text has (a file name's that is not UTF-8, which ``os.fsdecode``
    turned into a lone surrogate): neither can be pasted, so those are written
    in ANSI-C quoting as the bytes they are (``$'sessions-\\xff.db'``).
    """
    if not any(unicodedata.category(char) in _UNPASTABLE for char in text):
        return shlex.quote(text)
    parts = ["$'"]
    escaped = False  # a hex digit right after an escape would be read as part of it
    for char in text:
        if unicodedata.category(char) in _UNPASTABLE:
            parts.extend(f"\\x{byte:02x}" for byte in _bytes_of(char))
            escaped = True
            continue
        if escaped and char in string.hexdigits:
            parts.append("'$'")
        parts.append({"\\": "\\\\", "'": "\\'"}.get(char, char))
        escaped = False
    parts.append("'")
    return "".join(parts)


_UNPASTABLE = frozenset({"Cc", "Cs"})
"""Control characters, and surrogates: a terminal acts on the one, and cannot show the other."""


def _bytes_of(char: str) -> bytes:
    """The bytes *char* stands for in a file name (``os.fsencode``'s), else its UTF-8 bytes."""
    if 0xDC80 <= ord(char) <= 0xDCFF:  # a byte os.fsdecode could not decode
        return bytes([ord(char) - 0xDC00])
    return char.encode("utf-8", "surrogatepass")


def without_password(spec: str) -> str:
    """*spec* with a PostgreSQL DSN's password hidden: the hint is printed, perhaps logged.

    A DSN that holds one is shown in ``key=value`` form with ``password=***``;
    the command then needs the password from elsewhere (``PGPASSWORD``, say).
    """
    kind, _, dsn = spec.partition(":")
    if kind != "postgres":
        return spec
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        return "postgres:<DSN>"  # it connected, so this is not expected; never echo it
    if "password" not in params:
        return spec
    return "postgres:" + make_conninfo("", **{**params, "password": "***"})
