"""Checks of an adapter's identity settings when it is built: its name, key and headers."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

__all__ = [
    "HTTP_TOKEN",
    "check_header_lines",
    "check_header_names",
    "check_header_values",
    "check_identity",
]

_HEADERS_CARRY = "which an HTTP header cannot carry as the SDK sends it: only ASCII"
HTTP_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
"""A header name HTTP carries: an RFC 9110 token."""
_EDGE_SPACE = " \t"


def check_identity(*, provider: object, headers: object, omit: type, **texts: object) -> None:
    """Refuse a *provider* name that is no non-empty ``str``, *headers* that are no
    mapping of ``str`` to ``str`` (or to the SDK's *omit* marker, which drops one of
    its default headers), or any of *texts* (by name) that is neither ``None`` nor a
    ``str``.

    Taken as they are, a wrong one would fail every request (a header value
    that is no text), or name the adapter's lane and errors with what no route
    can name.

    Raises:
        TypeError: naming the setting and its value.
    """
    if not isinstance(provider, str) or not provider:
        raise TypeError(f"provider must be a non-empty str, not {provider!r}")
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise TypeError(f"default_headers must be a mapping of str to str, not {headers!r}")
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str | omit):
                raise TypeError(f"default_headers must map str to str, not {name!r} to {value!r}")
    for name, value in texts.items():
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be None or a str, not {value!r}")


def _beyond_ascii(text: str) -> str | None:
    """Where *text* holds its first character beyond ASCII, and which it is; ``None`` if none."""
    if text.isascii():
        return None
    position, char = next((i, c) for i, c in enumerate(text) if not c.isascii())
    return (
        f"holds {unicodedata.name(char, 'a character')} (U+{ord(char):04X}) at position {position}"
    )


def _not_sendable(text: str) -> str | None:
    """What HTTP forbids in *text* as a header value: a control character (a line
    break, say) or whitespace at either end; or what no encoding of it can hold, a lone
    surrogate (from bytes decoded with ``surrogateescape``, say); ``None`` if nothing."""
    for position, char in enumerate(text):
        category = unicodedata.category(char)
        if char != "\t" and category == "Cc":
            return f"holds the control character U+{ord(char):04X} at position {position}"
        if category == "Cs":
            return f"holds the lone surrogate U+{ord(char):04X} at position {position}"
    if text and (text[0] in _EDGE_SPACE or text[-1] in _EDGE_SPACE):
        return "starts or ends with whitespace"
    return None


def check_header_names(headers: Mapping[str, object] | None) -> None:
    """Refuse a default header whose name holds a character beyond ASCII, or is no
    HTTP token (empty, or holding a space, a colon or a control character).

    Both SDKs encode a header's name as ASCII when they build each request, and
    HTTP carries only a token: such a name would fail every request, with an
    error that names no setting.

    Raises:
        ValueError: naming the header and the character.
    """
    for name in headers or {}:
        problem = _beyond_ascii(name)
        if problem is not None:
            raise ValueError(f"the default header name {name!r} {problem}, {_HEADERS_CARRY}")
        if HTTP_TOKEN.fullmatch(name) is None:
            raise ValueError(
                f"the default header name {name!r} is no HTTP token: only letters, "
                "digits and !#$%&'*+-.^_`|~"
            )


def _sent_texts(
    headers: Mapping[str, object] | None, texts: dict[str, str | None]
) -> dict[str, object]:
    """The default headers' values and *texts*, by the name a refusal gives each."""
    named = {f"default_headers[{name!r}]": value for name, value in (headers or {}).items()}
    return named | texts


def check_header_lines(headers: Mapping[str, object] | None, **texts: str | None) -> None:
    """Refuse a default header's value, or one of *texts* (by name) that the SDK sends as
    a header (a key), holding a control character or whitespace at either end.

    HTTP carries neither, and both SDKs send these as they are: a key read from
    a file with its final line break would fail every request with a
    ``CLIENT_ERROR`` that names no setting. The value is not shown, as it may be
    a key.

    Raises:
        ValueError: naming the setting and the character.
    """
    for name, text in _sent_texts(headers, texts).items():
        problem = _not_sendable(text) if isinstance(text, str) else None
        if problem is not None:
            raise ValueError(f"{name} {problem}, which no HTTP header carries")


def check_header_values(headers: Mapping[str, object] | None, **texts: str | None) -> None:
    """Refuse a default header's value, or one of *texts* (by name) that the SDK sends as a
    header (a key, an organization), holding a character beyond ASCII.

    The OpenAI SDK encodes its header values as ASCII: a key pasted with a
    no-break space would fail every request, with an error that names no setting.
    The value is not shown, as it may be a key. Values are refused as
    :func:`check_header_lines` refuses them too.

    Raises:
        ValueError: naming the setting and the character.
    """
    check_header_lines(headers, **texts)
    for name, text in _sent_texts(headers, texts).items():
        problem = _beyond_ascii(text) if isinstance(text, str) else None
        if problem is not None:
            raise ValueError(f"{name} {problem}, {_HEADERS_CARRY}")
