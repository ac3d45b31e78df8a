"""A PostgreSQL DSN's password, kept out of the lines the ``retinue`` command writes."""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["passwords_in", "without_passwords"]

# Read leniently, not by libpq's parser: a DSN it refuses still holds the password,
# and its refusal quotes what it refused (the whole URI, or a badly encoded token).
# The scheme is optional: ``--store postgres://...`` reaches libpq as ``//...``.
_URI_USERINFO = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:)?//([^@]*)@")
_URI_USERINFO_TO_LAST_AT = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:)?//(.*)@")
_URI_QUERY_PASSWORD = re.compile(r"[?&]password=([^&#]*)")
_KEYWORD_PASSWORD = re.compile(r"(?:^|\s)password\s*=\s*('(?:\\.|[^'\\])*'?|\S*)")


def passwords_in(dsn: str) -> set[str]:
    """Every spelling of a password *dsn* may hold: as written, and percent-decoded.

    Where it is unclear which part is the password (an ``@`` in it, unencoded),
    each reading is given: hiding more than the password costs only the text hidden.
    """
    found: set[str] = set()
    for pattern in (_URI_USERINFO, _URI_USERINFO_TO_LAST_AT):
        userinfo = pattern.match(dsn)
        if userinfo is not None and ":" in userinfo[1]:
            found.add(userinfo[1].split(":", 1)[1])
    found.update(match[1] for match in _URI_QUERY_PASSWORD.finditer(dsn))
    for match in _KEYWORD_PASSWORD.finditer(dsn):
        value = match[1]
        found.add(value)
        if value.startswith("'"):
            found.add(re.sub(r"\\(.)", r"\1", value.removeprefix("'").removesuffix("'")))
    found |= {urllib.parse.unquote(password) for password in found}
    return {password for password in found if password}


def without_passwords(text: str, dsn: str) -> str:
    """*text* with every spelling of *dsn*'s password written ``***``."""
    # Longest first: a shorter spelling inside a longer one would leave the rest shown.
    for password in sorted(passwords_in(dsn), key=len, reverse=True):
        text = text.replace(password, "***")
    return text
