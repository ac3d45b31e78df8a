"""A provider error's headers are text, as a response's are: a custom model's error whose
headers hold anything else is refused when built, not where admission reads them."""

from __future__ import annotations

import httpx2
import pytest

from retinue.providers import ProviderError, RateLimitError


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-reset-requests": 5},
        {"x-ratelimit-remaining-requests": None},
        {b"retry-after": "1"},
        {5: "1"},
    ],
    ids=["int-value", "none-value", "bytes-name", "int-name"],
)
def test_an_error_refuses_headers_that_are_not_text(headers: dict[object, object]) -> None:
    """R10.3: a header name or value that is no str is a TypeError naming it when the
    error is built, where admission's reading of it failed the call with an
    AttributeError."""
    with pytest.raises(TypeError, match="headers"):
        RateLimitError("slow", status=429, retryable=True, headers=headers)  # type: ignore[arg-type]


def test_an_error_takes_a_response_s_headers() -> None:
    """A response's headers, or a plain mapping of text, are kept as a dict of them."""
    response = httpx2.Headers({"Retry-After": "2"})
    for headers in (response, {"retry-after": "2"}, None):
        error = ProviderError("failed", headers=headers)
        assert dict(error.headers) in ({"retry-after": "2"}, {})
