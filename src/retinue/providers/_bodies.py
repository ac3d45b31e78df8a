"""The text of an error response's body, in whatever charset its response names."""

from __future__ import annotations

import codecs

import httpx2

__all__ = ["body_text", "error_body", "leave_body_undecoded"]

_MARKS = (
    # UTF-32's little-endian mark starts with UTF-16's: it is looked for first.
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
"""Each byte order mark and the charset it says a body is in."""


def _byte_order(family: str, content: bytes) -> str | None:
    """*family* (``utf-16`` or ``utf-32``, named without a byte order) in the order
    *content*'s NUL bytes show; ``None`` when they show none.

    A character below U+0100 (in UTF-32, any) has a NUL high byte: its unit's
    last little-endian, its first big-endian. Counted over the whole body, a
    text that opens with Cyrillic or CJK shows its order too; a body without
    them (UTF-8 JSON, a server's English) is in neither.
    """
    width = 2 if family == "utf-16" else 4
    little, big = content[width - 1 :: width].count(0), content[::width].count(0)
    if little == big:
        return None
    return f"{family}-le" if little > big else f"{family}-be"


def _text_encoding(charset: str | None, content: bytes) -> str | None:
    """The codec *charset* names, if it is one that decodes bytes to text (a UTF-16 or
    UTF-32 named without its byte order: in the order *content* shows, see
    :func:`_byte_order`); ``None`` otherwise (no charset, an unknown one, ``base64``)."""
    if not charset:
        return None
    try:
        codec = codecs.lookup(charset)
    except LookupError:
        return None
    # The stdlib's own mark of the codecs that decode bytes to text.
    if not codec._is_text_encoding:
        return None
    if codec.name in ("utf-16", "utf-32"):
        return _byte_order(codec.name, content)
    return codec.name


def body_text(content: bytes, charset: str | None) -> str:
    """*content* as text: in the charset a byte order mark opening it names, else in
    *charset* (its response's), else, when that cannot read it, in UTF-8.

    A server may name a charset its body is not in (UTF-16 on UTF-8 bytes) or
    no charset at all (``base64``): the body still says what went wrong.
    """
    for mark, encoding in _MARKS:
        if content.startswith(mark):
            return content[len(mark) :].decode(encoding, "replace")
    named = _text_encoding(charset, content)
    if named is not None:
        try:
            return content.decode(named)
        except UnicodeError:
            pass  # not in that charset after all: read as UTF-8 below
    return content.decode("utf-8", "replace")


def error_body(response: httpx2.Response, parsed: object) -> object:
    """The body of the error *response* as text (see :func:`body_text`), or *parsed*, the
    SDK's reading of it, when the body was never read."""
    try:
        content = response.content
    except httpx2.ResponseNotRead:
        return parsed
    return body_text(content, response.charset_encoding)


def leave_body_undecoded(response: httpx2.Response) -> None:
    """Have the SDK decode an error *response*'s body as UTF-8, which cannot fail.

    The SDKs decode it in the charset its response names, and some names
    raise on it from inside the SDK (a UTF-16 body without a byte order
    mark, a codec that is no text encoding) in place of the status's error:
    the adapters read the bytes themselves (:func:`error_body`).
    """
    if not response.is_success:
        response.encoding = "utf-8"
