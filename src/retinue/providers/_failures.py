"""Typed provider errors, the mapping from HTTP statuses, error bodies and in-stream
error events to them, and what a failure asks of a caller: a retry, a pause of its lane.

::

    ModelError                      (retinue._errors)
    └── ProviderError               a provider call failed: status, code, retry_after, retryable
        ├── ProviderStatusError     the provider answered with an HTTP error status
        │   │                       (a spent quota too: QUOTA_EXHAUSTED, even on a 429)
        │   ├── AuthenticationError 401 / 403
        │   ├── ModelNotFoundError  404, or any status coded model_not_found
        │   ├── RateLimitError      429
        │   └── OverloadedError     529 (and 503)
        ├── ProviderConnectionError the connection failed, timed out, or the stream was cut
        └── ProviderStreamError     the stream carried an error event or could not be parsed
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TypeGuard, TypeVar

from retinue._errors import ModelError

from ._ratelimits import retry_after_seconds, spent_budget_wait

__all__ = [
    "QUOTA_EXHAUSTED",
    "AuthenticationError",
    "ModelNotFoundError",
    "OverloadedError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderStatusError",
    "ProviderStreamError",
    "RateLimitError",
    "error_from_body",
    "names_exhausted_quota",
    "never_sent",
    "numeric_status",
    "retry_verdict",
    "status_error",
    "stream_error",
    "throttles",
    "unsent",
]

RETRYABLE_STATUSES = frozenset({408, 409, 429, *range(500, 600)} - {501, 505})
"""The statuses retried by default: those the official SDKs retry (408, 409, 429 and every
5xx, the 520 to 524 of the proxies in front of the APIs included), but 501 and 505.

Those two say the server cannot serve the request at all (its method or its
HTTP version): every retry would get the same answer, after the backoff.
"""
QUOTA_EXHAUSTED = "QUOTA_EXHAUSTED"
"""The code of a failure that says the account's quota or credit is spent.

Only a billing change mends it: it is not retried and is not a rate limit,
though OpenAI sends it as a 429.
"""
# The code of an answer that could not be read (not what the API sends): retried.
_MALFORMED_RESPONSE = "MALFORMED_RESPONSE"
_QUOTA_NAME = "insufficient_quota"
_MODEL_NOT_FOUND = "model_not_found"
# Anthropic's timeout_error (its 504) comes without a status inside a stream: retried,
# as every code here is, when the policy retries connection errors.
RETRYABLE_STREAM_CODES = frozenset(
    {
        "overloaded_error",
        "api_error",
        "rate_limit_error",
        "timeout_error",
        "server_error",
        "rate_limit_exceeded",
    }
)
# A 503 is the overload an OverloadedError names as a 529 is (OpenAI's "engine is
# overloaded", "slow down"; RFC 9110's temporary overload): a congestion signal the lane
# backs off from, not a failure of the one request as a 500 or a 502 is.
_THROTTLING_STATUSES = frozenset({429, 503, 529})
# The same signals sent as an error event inside a 200 stream (Anthropic's
# overloaded_error is the common one).
_THROTTLING_STREAM_CODES = frozenset(
    {"overloaded_error", "rate_limit_error", "rate_limit_exceeded"}
)


class ProviderError(ModelError):
    """A provider call failed.

    ``code`` is the provider's error code (or type) when it gave one, else a
    retinue code such as ``HTTP_500`` or ``CONNECTION_ERROR``. ``retryable``
    says whether the default retry policy retries this kind of failure; unless
    given, it follows from the ``status`` (the statuses retried by default,
    ``x-should-retry``, a spent quota), or without one from the class (see
    :meth:`_retried_without_status`). It does not weigh the wait: a failure whose
    ``retry_after`` is longer than a policy's ``max_retry_after`` may read ``True``
    and still not be retried (see :meth:`RetryPolicy.is_retryable`).
    ``retry_after`` is the wait in seconds the provider asked for, if any;
    ``headers`` the response's headers.

    Raises:
        TypeError: a header name or value is no str.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if status is None:
            status = self._status_of_code(code)
        super().__init__(message, code=code, status=status)
        self.retry_after = retry_after
        self.headers: Mapping[str, str] = _text_headers(headers)
        if retryable is None:
            retryable = self._retried_by_default()
        self.retryable = retryable
        self._unsent = False

    def _retried_by_default(self) -> bool:
        """Whether :class:`RetryPolicy`'s defaults retry this error: by its status when it has one."""
        if self.status is None:
            return self._retried_without_status()
        verdict = retry_verdict(self.code, self.headers)
        return self.status in RETRYABLE_STATUSES if verdict is None else verdict

    def _retried_without_status(self) -> bool:
        """A failure of no known kind is final: a retry would repeat it."""
        return False

    @staticmethod
    def _status_of_code(_code: str | None) -> int | None:
        """The status a *code* given without one names: none, but for a stream's error."""
        return None


_Failure = TypeVar("_Failure", bound=ProviderError)


def unsent(error: _Failure) -> _Failure:
    """*error*, marked as the failure of a request that never reached the provider.

    Only where nothing can have been sent: a connection never made, a request
    refused before it went out. Admission gives back such an attempt's charge.
    """
    error._unsent = True
    return error


def never_sent(error: BaseException | None) -> bool:
    """Whether *error* is the failure of a request that never reached the provider."""
    return isinstance(error, ProviderError) and error._unsent


def _text_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    # Read as text wherever the error is handled (admission reads the rate-limit
    # headers): a custom model's int would fail the call there, far from its source.
    found = dict(headers or {})
    items: Iterable[tuple[object, object]] = found.items()  # as given, whatever the type says
    for name, value in items:
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(
                "a provider error's headers must map str names to str values, "
                f"not {name!r}: {value!r:.80}"
            )
    return found


class ProviderStatusError(ProviderError):
    """The provider answered with an HTTP error status."""


class AuthenticationError(ProviderStatusError):
    """The credentials were missing, invalid or not allowed (401, 403)."""


class ModelNotFoundError(ProviderStatusError):
    """The model or endpoint does not exist (404), or the key may not use the model.

    OpenAI codes an unknown model ``model_not_found`` whatever the status it
    sends: 404 from Chat Completions, 400 from the Responses API, 403 for a
    model the project may not use.
    """


class RateLimitError(ProviderStatusError):
    """The provider rate-limited the call (429); a spent quota is no rate limit."""

    def _retried_without_status(self) -> bool:
        return self.code != QUOTA_EXHAUSTED


class OverloadedError(ProviderStatusError):
    """The provider is overloaded (529, 503)."""

    def _retried_without_status(self) -> bool:
        return True


class ProviderConnectionError(ProviderError):
    """The connection failed, timed out, or the stream ended before it was complete."""

    def _retried_without_status(self) -> bool:
        return True


class ProviderStreamError(ProviderError):
    """The stream reported an error event, or carried data that cannot be parsed.

    A numeric ``code`` given without a ``status`` is taken for the status too, as the
    adapters read an error event's: the HTTP status the server would have answered
    with, which the retry policy and the admission lanes judge.
    """

    @staticmethod
    def _status_of_code(code: str | None) -> int | None:
        return numeric_status(code)

    def _retried_without_status(self) -> bool:
        # As an error event's code is judged: a busy or failing server is tried again,
        # and an answer that could not be read.
        return self.code in RETRYABLE_STREAM_CODES or self.code == _MALFORMED_RESPONSE


_STATUS_CLASSES: dict[int, type[ProviderStatusError]] = {
    401: AuthenticationError,
    403: AuthenticationError,
    404: ModelNotFoundError,
    429: RateLimitError,
    503: OverloadedError,
    529: OverloadedError,
}


def _loaded(body: object) -> object:
    """*body* parsed, when it is JSON text or bytes; otherwise *body* itself."""
    if isinstance(body, bytes | str):
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            return body
    return body


def _error_object(body: object) -> object:
    """*body* parsed; a non-empty list stands for its first element.

    Gemini's OpenAI-compatible endpoint wraps its error body in a list.
    """
    body = _loaded(body)
    return body[0] if isinstance(body, list) and body else body


def _excerpt(body: object) -> str | None:
    """The start of *body* as text, for a body that gives no message of its own."""
    if isinstance(body, bytes):
        text = body.decode("utf-8", "replace")
    elif isinstance(body, str):
        text = body
    else:
        text = json.dumps(body, ensure_ascii=False, default=repr)
    return text.strip()[:500] or None


def _code_and_message(body: object) -> tuple[str | None, str | None]:
    if not isinstance(body, dict):
        return None, None
    error = body.get("error", body)
    if not isinstance(error, dict):
        # A gateway's own layout ({"error": true, "message": ...}): its message says more
        # than a flag, and a body with neither is quoted whole.
        message = body.get("message")
        if isinstance(message, str) and message.strip():
            return None, message
        return None, error if isinstance(error, str) and error.strip() else None
    code = error.get("code") or error.get("type")
    message = error.get("message")
    return (
        str(code) if code is not None else None,
        str(message) if message is not None else None,
    )


def error_from_body(body: object) -> tuple[str | None, str | None]:
    """Extract ``(code, message)`` from an OpenAI- or Anthropic-style error body.

    Accepts the parsed JSON or raw text/bytes; the code is ``error.code`` when
    present, else ``error.type``. A body in a shape that gives no message
    (plain text, an unknown JSON layout) gives its own start as the message:
    the status alone rarely says what went wrong.
    """
    found = _error_object(body)
    if isinstance(found, bytes | str):
        return None, _excerpt(found)
    code, message = _code_and_message(found)
    if not message and found:
        message = _excerpt(body)
    return code, message


def names_exhausted_quota(error: object) -> bool:
    """Whether an error object (or a body holding one) says the quota is spent.

    OpenAI names it in both ``code`` and ``type``; a compatible server or proxy
    may keep only one, or put a status number in ``code``.
    """
    error = _error_object(error)
    if isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]
    if not isinstance(error, dict):
        return False
    # A tuple's ``in`` compares: a code that is an object or a list cannot break it.
    return _QUOTA_NAME in (error.get("code"), error.get("type"))


def numeric_status(code: object) -> int | None:
    """The HTTP status an error event's numeric code names (``500``, ``"503"``), if any.

    Some servers (vLLM, LiteLLM) give the status they would have answered
    with as an in-stream error's ``code``.
    """
    if isinstance(code, str) and len(code) == 3 and code.isascii() and code.isdigit():
        status: object = int(code)
    elif isinstance(code, float) and code.is_integer():
        status = int(code)
    else:
        status = code
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return status
    return None


_SHOULD_RETRY_VERDICTS = ("true", "false")
"""The values of ``x-should-retry`` that decide: a tuple, whose ``in`` compares."""


def retry_verdict(code: str | None, headers: Mapping[str, str]) -> bool | None:
    """Whether a failure may be retried, when its status does not decide it; ``None`` if it does.

    The provider's ``x-should-retry`` decides either way when it says ``true`` or
    ``false``; another value says neither, as the official SDKs read it. Failing
    that, a spent quota is final whatever its status: only a billing change mends it.
    """
    should_retry = headers.get("x-should-retry")
    if should_retry in _SHOULD_RETRY_VERDICTS:
        return should_retry == "true"
    return False if code == QUOTA_EXHAUSTED else None


def throttles(error: BaseException | None) -> TypeGuard[ProviderError]:
    """Whether *error* is a 429, 503 or 529, or the same signal in a stream, not a spent quota.

    A spent quota is a billing matter: pausing the lane would hold up every
    session on it, to no end.
    """
    # Not error.retryable: a 429 the provider says not to retry still throttles,
    # and a spent quota it says to retry still does not.
    if not isinstance(error, ProviderError) or error.code == QUOTA_EXHAUSTED:
        return False
    if error.status is not None:
        return error.status in _THROTTLING_STATUSES
    return error.code in _THROTTLING_STREAM_CODES


def status_error(
    status: int,
    body: object,
    headers: Mapping[str, str],
    *,
    provider: str,
    detail: str | None = None,
) -> ProviderStatusError:
    """Build the typed error for an HTTP error *status* with its *body* and *headers*.

    *detail* stands in for the body's message when it has none (it could not be read).
    The wait is the ``Retry-After``; without one, the reset of a budget the
    rate-limit headers report spent (OpenAI sends those on a 429, not always a
    ``Retry-After``): a retry before it would only be refused again.
    """
    if isinstance(body, str):
        # A server may start its body with a byte order mark, which no JSON parser skips
        # in text: the body would be quoted whole, its message and code unread.
        body = body.removeprefix("\ufeff")
    code, message = error_from_body(body)
    message = message or detail
    # The code names a missing model better than the status: see ModelNotFoundError.
    cls = _STATUS_CLASSES.get(status, ProviderStatusError)
    if code == _MODEL_NOT_FOUND:
        cls = ModelNotFoundError
    if names_exhausted_quota(body):
        # Not a RateLimitError: code that backs off and retries on those would wait for ever.
        code, cls = QUOTA_EXHAUSTED, ProviderStatusError
    verdict = retry_verdict(code, headers)
    return cls(
        f"{provider} returned HTTP {status}: {message or 'no message'}",
        code=code or f"HTTP_{status}",
        status=status,
        retry_after=_wait_asked(code, headers),
        retryable=status in RETRYABLE_STATUSES if verdict is None else verdict,
        headers=headers,
    )


def _wait_asked(code: str | None, headers: Mapping[str, str]) -> float | None:
    retry_after = retry_after_seconds(headers)
    # No wait mends a spent quota: naming one would invite a retry in vain.
    if retry_after is not None or code == QUOTA_EXHAUSTED:
        return retry_after
    return spent_budget_wait(headers)


def _named_code(fields: Mapping[str, object]) -> object:
    """The first of an error's ``code`` and ``type`` that names something: a number or
    text (stripped). An empty or other value names nothing a caller could act on, nor
    does a ``type`` of ``error``: that is the tag of an ``error`` event itself."""
    for value in (fields.get("code"), fields.get("type")):
        if isinstance(value, str) and value.strip() and value.strip() != "error":
            return value.strip()
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
    return None


def stream_error(error: object, *, where: str) -> ProviderStreamError:
    """The error for an ``error`` object that arrived inside a stream.

    A numeric code is the HTTP status the server would have answered with: the
    error carries it as its ``status`` and is retryable as that status is. A
    spent quota is :data:`QUOTA_EXHAUSTED` and never retryable, whatever the status.
    """
    fields = error if isinstance(error, dict) else {}
    code = _named_code(fields)
    message = fields.get("message") or (str(error) if error else "the server gave no detail")
    status = numeric_status(code)
    if names_exhausted_quota(fields) or code == QUOTA_EXHAUSTED:
        code_text, retryable = QUOTA_EXHAUSTED, False
    elif status is not None:
        code_text, retryable = str(status), status in RETRYABLE_STATUSES
    else:
        code_text = "STREAM_ERROR" if code is None else str(code)
        # An error given as plain text (a proxy's) has no code to judge it by: it is
        # retried as a garbled answer is.
        retryable = code_text in RETRYABLE_STREAM_CODES or isinstance(error, str)
    return ProviderStreamError(
        f"{where} stream error: {message}", code=code_text, status=status, retryable=retryable
    )
