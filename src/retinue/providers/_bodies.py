"""An error response's body: read as text in whatever charset its response names, kept
readable for the SDK that raises on it, and turned into the status's typed error."""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator
from typing import Protocol, final

import httpx2

from ._failures import ProviderStatusError, status_error

__all__ = ["keep_error_body_decodable", "sdk_status_error"]

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
    codec = _text_codec(charset) if charset else None
    if codec is None:
        return None
    if codec.name in ("utf-16", "utf-32"):
        return _byte_order(codec.name, content)
    return codec.name


def _text_codec(charset: str) -> codecs.CodecInfo | None:
    """The codec *charset* names if it decodes bytes to text; ``None`` for an unknown
    name or one that does not (``base64``)."""
    try:
        codec = codecs.lookup(charset)
    except LookupError:
        return None
    # The stdlib's own mark of the codecs that decode bytes to text.
    return codec if codec._is_text_encoding else None


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


class SdkStatusError(Protocol):
    """What each SDK's error for a response's status carries."""

    status_code: int
    response: httpx2.Response
    body: object


def sdk_status_error(exc: SdkStatusError, provider: str) -> ProviderStatusError:
    """The typed error for the SDK's status error *exc*, its body read as text."""
    body: object
    try:
        body = body_text(exc.response.content, exc.response.charset_encoding)
    except httpx2.ResponseNotRead:
        body = exc.body  # the SDK's reading, all there is of a body never read
    return status_error(exc.status_code, body, exc.response.headers, provider=provider)


_UNMARKED = {
    "utf-16": (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE),
    "utf-32": (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE),
}
"""The charsets named without a byte order, and the marks the SDK needs to read them:
its reading of a body without one raises."""


def _unreadable(charset: str) -> bool:
    """Whether the SDK's reading of a body in *charset* raises whatever the body is: a
    codec that is no text encoding (``base64``), one that refuses to replace what it
    cannot read (``idna``), or one that fails on a byte that is no ASCII (``punycode``).

    An unknown name is here too: the SDK reads its body as UTF-8 already.
    """
    if _text_codec(charset) is None:
        return True
    try:
        # As httpx2 decodes a body, on a byte no text starts with.
        decoder = codecs.getincrementaldecoder(charset)(errors="replace")
        "".join((decoder.decode(b"\xff"), decoder.decode(b"", final=True)))
    except Exception:  # each one the SDK's, raised in place of the status's error
        return True
    return False


@final
class _MarkedOrUtf8(httpx2.AsyncByteStream):
    """An error body in a UTF-16 or UTF-32 named without its byte order, as it arrives: the
    SDK reads one that opens with none of *marks* as UTF-8, where its reading would raise."""

    def __init__(
        self, response: httpx2.Response, body: httpx2.AsyncByteStream, marks: tuple[bytes, ...]
    ) -> None:
        self._response, self._body, self._marks = response, body, marks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        head, width = b"", len(self._marks[0])
        async for part in self._body:
            if len(head) < width:
                head += part[: width - len(head)]
                if len(head) == width and not head.startswith(self._marks):
                    self._response.encoding = "utf-8"
            yield part

    async def aclose(self) -> None:
        await self._body.aclose()


def keep_error_body_decodable(response: httpx2.Response) -> None:
    """Have the SDK decode an error *response*'s body as UTF-8 where its own reading, in
    the charset its response names, would raise in place of the status's error.

    Elsewhere the SDK's error, the cause of the adapter's, reads the body as
    the adapter does (a latin-1 one in latin-1). The adapters read the bytes
    themselves (:func:`sdk_status_error`), whichever charset the SDK read them in.
    """
    if response.is_success:
        return
    charset = response.charset_encoding
    if not charset:
        return
    if _unreadable(charset):
        response.encoding = "utf-8"
        return
    marks = _UNMARKED.get(codecs.lookup(charset).name)
    if marks is not None:
        _read_marked(response, marks)


def _read_marked(response: httpx2.Response, marks: tuple[bytes, ...]) -> None:
    """Have the SDK read *response*'s body as UTF-8 unless it opens with one of *marks*."""
    try:
        content = response.content
    except httpx2.ResponseNotRead:
        pass
    else:
        if len(content) >= len(marks[0]) and not content.startswith(marks):
            response.encoding = "utf-8"
        return
    body, coded = response.stream, response.headers.get("content-encoding", "identity")
    if isinstance(body, httpx2.AsyncByteStream) and coded.strip().lower() == "identity":
        response.stream = _MarkedOrUtf8(response, body, marks)
    else:
        # Bytes this cannot see before the SDK decodes them: read as UTF-8, which never fails.
        response.encoding = "utf-8"
