"""Error bodies in shapes other than OpenAI's and Anthropic's still say what went wrong."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import anthropic
import httpx2
import openai
import pytest
import trio

from retinue.providers import ModelNotFoundError, ProviderConnectionError, ProviderStatusError
from retinue.providers._failures import error_from_body
from retinue.providers.mock import MockServer, RawReply, ScriptedPolicy

from .support import JSON, BrokenErrorBody, PartsBody, _adapter, collect, make_request, mock_adapter

GEMINI_MESSAGE = 'Invalid JSON payload received. Unknown name "stop": Cannot find field.'
# What Gemini's OpenAI-compatible endpoint answers: the error body, wrapped in a list.
GEMINI_ERROR = [{"error": {"code": 400, "message": GEMINI_MESSAGE, "status": "INVALID_ARGUMENT"}}]


async def _refusal(
    api: str, body: bytes, status: int = 400, headers: Any = JSON
) -> ProviderStatusError:
    """The error *api*'s adapter raises when the server answers *status* with *body*."""
    server = MockServer(ScriptedPolicy([RawReply(status, headers, body)]))
    with trio.fail_after(5):
        async with mock_adapter(api, server) as model:
            with pytest.raises(ProviderStatusError) as caught:
                await collect(model, make_request("hi"))
    return caught.value


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_an_error_body_that_is_a_list_gives_its_first_errors_message(api: str) -> None:
    """R10.3: a 400 whose body is a list of error objects (Gemini) raises with the message
    of the first one, not "no message"."""
    failure = await _refusal(api, json.dumps(GEMINI_ERROR).encode())
    assert GEMINI_MESSAGE in str(failure)
    assert (failure.status, failure.code) == (400, "400")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b'{"detail": "Not Found"}', '"detail": "Not Found"'),
        (b'{"error": {"code": 42}}', '"code": 42'),
        (b"[7]", "[7]"),
    ],
    ids=["other-layout", "error-without-message", "list-of-no-error"],
)
async def test_an_error_body_that_gives_no_message_is_shown_itself(
    api: str, body: bytes, shown: str
) -> None:
    """A JSON error body in a layout that names no message is quoted in the error, as a
    body that is not JSON already is."""
    failure = await _refusal(api, body)
    assert shown in str(failure)
    assert "no message" not in str(failure)


GATEWAY_MESSAGE = "model gpt-x is not enabled for this key"


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("error", [None, True, "Bad Request"], ids=["null", "flag", "text"])
async def test_an_error_body_whose_error_is_no_object_gives_its_own_message(
    api: str, error: object
) -> None:
    """R10.3: a gateway's 400 of its own layout (``{"error": true, "message": ...}``)
    raises with that message, not "no message", "True" or the bare ``error`` text."""
    body = json.dumps({"error": error, "message": GATEWAY_MESSAGE}).encode()
    failure = await _refusal(api, body)
    assert (failure.status, failure.code) == (400, "HTTP_400")
    assert str(failure).endswith(f"returned HTTP 400: {GATEWAY_MESSAGE}")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_an_error_body_whose_error_is_a_list_is_quoted_whole(api: str) -> None:
    """An ``error`` that is neither an object nor text names no message: the body is
    quoted whole, all of its items, not its first item alone."""
    failure = await _refusal(api, b'{"error": ["field stop unknown", "field n unknown"]}')
    assert "field stop unknown" in str(failure)
    assert "field n unknown" in str(failure)


def test_an_error_body_parsed_already_is_quoted_as_json() -> None:
    """The SDKs hand over the body parsed: one without a message is quoted as JSON text,
    cut to 500 characters; an empty body still gives no message."""
    assert error_from_body({"detail": "Not Found"}) == (None, '{"detail": "Not Found"}')
    long = error_from_body({"detail": "x" * 1000})
    assert long == (None, '{"detail": "' + "x" * 488)
    empties: tuple[object, ...] = ({}, [], b"[]", b"", None)
    assert [error_from_body(empty) for empty in empties] == [(None, None)] * len(empties)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_an_error_body_nested_too_deeply_to_parse_still_gives_its_status(api: str) -> None:
    """R10.3: a body nested past the parser's depth is quoted like one that is not JSON,
    keeping the status, not raised as a bare ``RecursionError``."""
    deep = b"[" * 100_000 + b"]" * 100_000
    failure = await _refusal(api, b'{"error":' + deep + b"}")
    assert (failure.status, failure.code, failure.retryable) == (400, "HTTP_400", False)
    provider = "anthropic" if api == "messages" else "openai"
    assert str(failure).startswith(f'{provider} returned HTTP 400: {{"error":[[[[')
    assert len(str(failure)) < 1000  # an excerpt, not the body


def _model_not_found(message: str) -> bytes:
    """An OpenAI error body coded ``model_not_found``."""
    error = {"message": message, "type": "invalid_request_error", "code": "model_not_found"}
    return json.dumps({"error": {**error, "param": "model"}}).encode()


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("status", "message"),
    [
        (404, "The model `gpt-x` does not exist or you do not have access to it."),
        (400, "The requested model 'gpt-x' does not exist."),
        # Synthetic: OpenAI's answer to a model the project may not use (no recording is public).
        (403, "Project `proj_1` does not have access to model `gpt-x`"),
    ],
    ids=["chat-404", "responses-400", "no-access-403"],
)
async def test_a_model_not_found_code_raises_model_not_found_whatever_the_status(
    api: str, status: int, message: str
) -> None:
    """OpenAI codes an unknown model ``model_not_found`` with 404 (Chat Completions), 400
    (Responses) or 403 (a model the project may not use): each raises ModelNotFoundError,
    with the status and code as sent, not retryable."""
    failure = await _refusal(api, _model_not_found(message), status)
    assert type(failure) is ModelNotFoundError
    assert (failure.status, failure.code, failure.retryable) == (status, "model_not_found", False)
    assert message in str(failure)


async def test_an_anthropic_model_not_found_raises_model_not_found() -> None:
    """Anthropic answers an unknown model 404 ``not_found_error``: ModelNotFoundError."""
    body = {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-x"}}
    failure = await _refusal("messages", json.dumps(body).encode(), 404)
    assert type(failure) is ModelNotFoundError
    assert (failure.status, failure.code, failure.retryable) == (404, "not_found_error", False)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_an_error_body_in_another_charset_reads_in_that_charset(api: str) -> None:
    """R10.3: a plain-text error body in the charset its response names (latin-1) is
    quoted in that charset; OpenAI's adapter read it as UTF-8 (``ung\ufffdltig``)."""
    latin1 = (("content-type", "text/plain; charset=latin-1"),)
    failure = await _refusal(api, "Fehler: ungültig".encode("latin-1"), headers=latin1)
    assert str(failure).endswith("HTTP 400: Fehler: ungültig")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_an_error_body_after_a_byte_order_mark_gives_its_message_and_code(
    api: str,
) -> None:
    """R10.3: a JSON error body that starts with a UTF-8 byte order mark gives its message
    and code, not the body quoted whole."""
    body = json.dumps({"error": {"message": "the key was revoked", "code": "revoked"}})
    failure = await _refusal(api, b"\xef\xbb\xbf" + body.encode())
    assert str(failure).endswith("HTTP 400: the key was revoked")
    assert failure.code == "revoked"


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("charset", ["utf-16", "utf-32", "idna", "base64", "rot13", "undefined"])
async def test_an_error_body_in_a_charset_it_is_not_in_gives_its_status_and_message(
    api: str, charset: str
) -> None:
    """R10.3: a UTF-8 JSON error body whose ``content-type`` names a charset that cannot
    read it (UTF-16 without a byte order mark, a codec that is no text encoding) gives
    its status, code and message, no UnicodeError (nor a TypeError, an AssertionError)
    from the SDK's decoding raised in the adapter's place."""
    body = json.dumps({"error": {"message": "Fehler: ungültig", "code": "bad_field"}})
    headers = (("content-type", f"application/json; charset={charset}"),)
    failure = await _refusal(api, body.encode(), headers=headers)
    assert (failure.status, failure.code) == (400, "bad_field")
    assert str(failure).endswith("HTTP 400: Fehler: ungültig")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("mark", ["utf-16-le", "utf-16-be"])
async def test_an_error_body_after_a_utf16_byte_order_mark_reads_in_utf16(
    api: str, mark: str
) -> None:
    """R10.3: a byte order mark says which charset a body is in, whatever its
    ``content-type`` names (here UTF-8)."""
    body = json.dumps({"error": {"message": "zu lang", "code": "too_long"}})
    encoded = "\ufeff".encode(mark) + body.encode(mark)
    headers = (("content-type", "application/json; charset=utf-8"),)
    failure = await _refusal(api, encoded, headers=headers)
    assert (failure.status, failure.code) == (400, "too_long")
    assert str(failure).endswith("HTTP 400: zu lang")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("encoding", ["utf-16-be", "utf-16-le", "utf-32-be"])
async def test_an_error_body_in_utf16_without_a_byte_order_mark_reads_in_its_byte_order(
    api: str, encoding: str
) -> None:
    """R10.3: a body in the UTF-16 (or UTF-32) its response names, without a byte order
    mark, is read in the byte order its NUL bytes show, as JSON's own reading has it."""
    body = json.dumps({"error": {"message": "zu lang", "code": "too_long"}})
    family = encoding.rsplit("-", 1)[0]
    headers = (("content-type", f"application/json; charset={family}"),)
    failure = await _refusal(api, body.encode(encoding), headers=headers)
    assert (failure.status, failure.code) == (400, "too_long")
    assert str(failure).endswith("HTTP 400: zu lang")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("status", [300, 304, 399])
async def test_a_redirect_body_in_a_charset_it_is_not_in_gives_its_status_and_message(
    api: str, status: int
) -> None:
    """R10.3: the SDKs raise a status error for any status but 2xx (a 3xx without a
    Location is not followed), and read its body as an error's: one in a charset that cannot read it
    gives its status and message, no UnicodeError from the SDK's decoding in its place."""
    body = json.dumps({"error": {"message": "pick one", "code": "multiple_choices"}})
    headers = (("content-type", "application/json; charset=utf-16"),)
    failure = await _refusal(api, body.encode(), status, headers)
    assert (failure.status, failure.code) == (status, "multiple_choices")
    assert str(failure).endswith(f"HTTP {status}: pick one")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("text", ["Ошибка: zu lang", "错误 模型 gpt-x 不存在"])
async def test_a_utf16_body_opening_with_other_script_reads_in_its_byte_order(
    api: str, encoding: str, text: str
) -> None:
    """R10.3: a plain-text body in the UTF-16 (or UTF-32) its response names without a byte
    order, and no byte order mark, whose text opens with Cyrillic or CJK, is read in the
    byte order the NUL bytes of its whole text show, not by its first bytes alone, which
    have none and would have it read in another order or as UTF-8."""
    family = encoding.rsplit("-", 1)[0]
    headers = (("content-type", f"text/plain; charset={family}"),)
    failure = await _refusal(api, text.encode(encoding), headers=headers)
    assert str(failure).endswith(f"HTTP 400: {text}")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
async def test_a_body_in_a_utf16_of_a_named_byte_order_reads_in_that_order(
    api: str, encoding: str
) -> None:
    """R10.3: a body in the UTF-16 (or UTF-32) its response names with its byte order
    (``utf-16-le``) is read in that order, whichever its first bytes seem to show
    (``Ā`` opens with a NUL in little-endian UTF-16, as an ASCII character does in
    big-endian)."""
    text = "Ābc: zu lang"
    headers = (("content-type", f"text/plain; charset={encoding}"),)
    failure = await _refusal(api, text.encode(encoding), headers=headers)
    assert str(failure).endswith(f"HTTP 400: {text}")


def _sdk_text(failure: ProviderStatusError) -> str:
    """The body as the SDK's error, the cause of *failure*, read it."""
    cause = failure.__cause__
    assert isinstance(cause, openai.APIStatusError | anthropic.APIStatusError)
    return cause.response.text


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize(
    ("charset", "body"),
    [
        ("iso-8859-1", "Größe ungültig".encode("latin-1")),
        ("windows-1252", "Passerelle indisponible \u2013 réessayez".encode("cp1252")),
        ("utf-16", "\ufeffGröße: zu lang".encode("utf-16-le")),
        ("utf-32", "\ufeffGröße: zu lang".encode("utf-32-be")),
    ],
    ids=["latin-1", "cp1252", "utf-16-marked", "utf-32-marked"],
)
async def test_the_sdks_error_reads_a_body_in_a_charset_it_can_read_in_it(
    api: str, charset: str, body: bytes
) -> None:
    """R10.3: the SDK's error, which the adapter's error is raised from, reads a body in the
    charset its response names when that can read it, as the adapter's does, not as UTF-8
    with U+FFFD in the place of each character UTF-8 cannot read."""
    headers = (("content-type", f"text/plain; charset={charset}"),)
    failure = await _refusal(api, body, headers=headers)
    text = body.decode(charset).removeprefix("\ufeff")
    assert str(failure).endswith(f"HTTP 400: {text}")
    assert _sdk_text(failure) == text


_Raised = TypeVar("_Raised", bound=BaseException)


async def _raised_through(
    api: str, answer: Callable[..., Any], kind: type[_Raised], **settings: Any
) -> _Raised:
    """The *kind* error *api*'s adapter (with *settings*) raises when *answer* serves it."""
    transport = httpx2.MockTransport(answer)
    with trio.fail_after(60):
        async with _adapter(api, "http://mock", transport=transport, **settings) as model:
            with pytest.raises(kind) as caught:
                await collect(model, make_request("hi"))
    return caught.value


async def _streamed_refusal(api: str, charset: str, *parts: bytes) -> ProviderStatusError:
    """The error *api*'s adapter raises when a 400 in *charset* arrives in *parts*."""

    def answer(_request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": f"text/plain; charset={charset}"}
        return httpx2.Response(400, headers=headers, stream=PartsBody(*parts))

    return await _raised_through(api, answer, ProviderStatusError)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("family", ["utf-16", "utf-32"])
async def test_an_arriving_body_in_a_utf16_named_without_its_order_is_read_after_its_mark(
    api: str, family: str
) -> None:
    """R10.3: a body read as it arrives, in the UTF-16 (or UTF-32) its response names
    without a byte order, is read so by the SDK's error after a byte order mark, though
    the network split the mark, and as UTF-8 without one, where the SDK's reading would
    raise."""
    text = "Größe: zu lang"
    marked = f"\ufeff{text}".encode(f"{family}-be")
    failure = await _streamed_refusal(api, family, marked[:1], marked[1:3], marked[3:])
    assert (str(failure).endswith(f"HTTP 400: {text}"), _sdk_text(failure)) == (True, text)
    plain = text.encode()
    failure = await _streamed_refusal(api, family, plain[:1], plain[1:])
    assert (str(failure).endswith(f"HTTP 400: {text}"), _sdk_text(failure)) == (True, text)


async def _redirect_refusal(api: str, failure: Exception | None) -> ProviderStatusError:
    """The error *api*'s adapter raises for a 302 whose body breaks with *failure*."""

    def answer(_request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "application/json"}
        return httpx2.Response(302, headers=headers, stream=BrokenErrorBody(failure))

    return await _raised_through(api, answer, ProviderStatusError, timeout=3.0)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_redirect_whose_body_breaks_or_stalls_names_its_status(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: a 3xx without a Location, which the SDKs raise as a status error as a 4xx, whose body
    breaks or does not come in time is that status's error, not a connection error (nor,
    when it stalls, one saying no response headers came)."""
    broken = await _redirect_refusal(api, httpx2.RemoteProtocolError("peer closed connection"))
    assert broken.status == 302
    assert "peer closed" in str(broken)
    stalled = await _redirect_refusal(api, None)
    assert stalled.status == 302
    assert "did not arrive within 3.0 s" in str(stalled)


async def _followed_redirect_timeout(api: str, *, body_stalls: bool) -> ProviderConnectionError:
    """The error *api*'s adapter raises when a followed 307's body, or its target, stalls."""

    async def answer(request: httpx2.Request) -> httpx2.Response:
        if "/moved" not in str(request.url):
            headers = {"location": "http://mock/moved"}
            if body_stalls:
                return httpx2.Response(307, headers=headers, stream=BrokenErrorBody(None))
            return httpx2.Response(307, headers=headers, content=b"")
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    return await _raised_through(api, answer, ProviderConnectionError, timeout=3.0)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_followed_redirect_whose_target_stalls_is_a_retryable_timeout(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: a 307 with a Location is followed (the client follows redirects), so its
    target sending no headers in time is a retryable timeout, as any request's, not the
    307's own error, never retried, saying its body did not arrive."""
    error = await _followed_redirect_timeout(api, body_stalls=False)
    assert (error.code, error.retryable) == ("TIMEOUT", True)
    assert "sent no response headers within 3.0 s" in str(error)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_followed_redirect_whose_own_body_stalls_says_so(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: a 307 with a Location whose own body does not arrive in time is the same
    retryable timeout, saying the redirect's body is what did not come, not that no
    response headers came, since the 307's did."""
    error = await _followed_redirect_timeout(api, body_stalls=True)
    assert (error.code, error.retryable) == ("TIMEOUT", True)
    assert "sent a 307 redirect whose body did not arrive within 3.0 s" in str(error)
