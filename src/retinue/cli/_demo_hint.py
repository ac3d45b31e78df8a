"""The demo's closing hint: the command that lists the sessions it stored, to paste."""

from __future__ import annotations

import os
import shlex
import shutil
import string
import unicodedata

from ._output import printable

__all__ = ["closing_hint", "invoked_as", "shell_word", "without_password"]


def closing_hint(spec: str, *, encoding: str = "utf-8", program: str = "retinue") -> str:
    """The line naming the store *spec* and the command that lists its sessions, for an
    output of *encoding*, run as *program* (see :func:`invoked_as`)."""
    # The command stays on one line to paste into a shell, even piped, quoted when the
    # path has spaces or glob characters, and given as its bytes when it holds a
    # control character, is no UTF-8, or has a character the output cannot show.
    store = without_password(spec)
    command = f"{program} sessions list --store {shell_word(store, encoding=encoding)}"
    return f"sessions stored in {printable(store)}: try `{command}`"


def invoked_as(argv0: str, executable: str, *, encoding: str = "utf-8") -> str:
    """The words that run retinue again from here, as this process was started.

    A console script outside the ``PATH`` (``.venv/bin/retinue demo`` in a
    venv never activated) is named by the path it was run by, which a bare
    ``retinue`` would not find; ``python -m retinue`` (or ``retinue.cli``) by
    the interpreter that ran it; else (on the ``PATH``, or called from code)
    ``retinue``.
    """
    name = os.path.basename(argv0)
    if name == "retinue" and os.sep in argv0:
        on_path = shutil.which("retinue")
        if on_path is None or not _same_file(on_path, argv0):
            return shell_word(argv0, encoding=encoding)
    elif name == "__main__.py":
        module = _module_run(os.path.dirname(argv0))
        if module is not None:
            return f"{shell_word(executable, encoding=encoding)} -m {module}"
    return "retinue"


_CLI = os.path.dirname(os.path.abspath(__file__))


def _module_run(package: str) -> str | None:
    """The module ``python -m`` ran from *package*'s ``__main__.py``, if it is retinue's."""
    if _same_file(package, os.path.dirname(_CLI)):
        return "retinue"
    if _same_file(package, _CLI):
        return "retinue.cli"
    return None


def _same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def shell_word(text: str, *, encoding: str = "utf-8") -> str:
    """*text* quoted as one word for a POSIX shell, to paste on one line from an output of
    *encoding*.

    Quoted as ``shlex.quote`` does, unless it holds a control character, a
    byte no text has (a file name's that is not UTF-8, which ``os.fsdecode``
    turned into a lone surrogate) or a character *encoding* has not (the
    output would show ``\\xe9`` for it, which names another file): none can be
    pasted, so those are written in ANSI-C quoting as the bytes they are
    (``$'sessions-\\xff.db'``).
    """
    unpastable = [_unpastable(char, encoding) for char in text]
    if not any(unpastable):
        return shlex.quote(text)
    parts = ["$'"]
    escaped = False  # a hex digit right after an escape would be read as part of it
    for char, as_bytes in zip(text, unpastable, strict=True):
        if as_bytes:
            parts.extend(f"\\x{byte:02x}" for byte in _bytes_of(char))
            escaped = True
            continue
        if escaped and char in string.hexdigits:
            parts.append("'$'")
        parts.append({"\\": "\\\\", "'": "\\'"}.get(char, char))
        escaped = False
    parts.append("'")
    return "".join(parts)


def _unpastable(char: str, encoding: str) -> bool:
    """Whether *char* must be given as its bytes in a word pasted from an output of *encoding*."""
    if unicodedata.category(char) in _UNPASTABLE:
        return True
    try:
        char.encode(encoding)
    except UnicodeEncodeError:
        return True
    return False


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
