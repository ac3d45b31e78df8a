"""A base URL with a query is refused when the adapter is built: the SDKs append each
request's path after the query, so no request reached its endpoint."""

from __future__ import annotations

import re

import pytest

from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel

ADAPTERS = [
    pytest.param(OpenAIModel, "OPENAI_BASE_URL", "http://gateway.internal/v1", id="openai"),
    pytest.param(AnthropicModel, "ANTHROPIC_BASE_URL", "http://gateway.internal", id="anthropic"),
]


@pytest.mark.parametrize(("adapter", "variable", "root"), ADAPTERS)
@pytest.mark.parametrize("query", ["?api-version=2024-10-01", "?key=k3y", "?"])
def test_a_base_url_with_a_query_is_refused_without_showing_it(
    adapter: type[OpenAIModel | AnthropicModel],
    variable: str,
    root: str,
    query: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``.../v1?api-version=1`` would send every request to ``/v1``, its query
    ``api-version=1chat/completions``: a 404 for each, naming no setting. It is refused,
    and the query, which may hold a gateway's key, is not shown."""
    expected = "must be an http:// or https:// URL without a query, which the request's path"
    with pytest.raises(ValueError, match=f"^base_url {re.escape(expected)}") as caught:
        adapter(base_url=root + query, api_key="k")
    assert str(caught.value).endswith(f"got {root + '?...'!r}")
    monkeypatch.setenv(variable, root + query)
    with pytest.raises(ValueError, match=f"^{variable} {re.escape(expected)}"):
        adapter(api_key="k")


@pytest.mark.parametrize(("adapter", "variable", "root"), ADAPTERS)
def test_a_base_url_with_a_fragment_is_still_taken(
    adapter: type[OpenAIModel | AnthropicModel], variable: str, root: str
) -> None:
    """A fragment never reaches a request's path: the URL works, and is not refused."""
    adapter(base_url=root + "#notes?x", api_key="k")


@pytest.mark.parametrize(("adapter", "variable", "root"), ADAPTERS)
@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("http://user:s3cret@gateway.internal/v1?x=1", "http://...@gateway.internal/v1?..."),
        ("http://user:s3cret@gate way.internal/v1", "http://...@gate way.internal/v1"),
        ("user:s3cret@gateway.internal/v1", "...@gateway.internal/v1"),
        ("https://user:abc/def@gateway.internal/v1", "https://...@gateway.internal/v1"),
        ("https://user:ab?cd@gateway.internal/v1", "https://...@gateway.internal/v1"),
        ("http:/user:s3cret@gateway.internal/v1", "...@gateway.internal/v1"),
        (
            "http://user:pw@gateway.internal:99999/v1#tok=sk",
            "http://...@gateway.internal:99999/v1#...",
        ),
        ("user:s3cret@gateway.internal/v1?next=http://x", "...@gateway.internal/v1?..."),
        ("localhost:8000/v1?api_key=sk-LEAK&cb=https://x", "localhost:8000/v1?..."),
    ],
    ids=[
        "with-a-query",
        "with-a-space",
        "without-a-scheme",
        "slash-in-the-password",
        "question-mark-in-the-password",
        "one-slash",
        "with-a-fragment",
        "a-url-in-the-query-after-user-information",
        "a-url-in-the-query-after-no-scheme",
    ],
)
def test_a_refused_base_url_is_shown_without_its_user_information(
    adapter: type[OpenAIModel | AnthropicModel],
    variable: str,
    root: str,
    given: str,
    shown: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Basic auth's password, which the adapter's repr leaves out, is not shown when the URL
    is refused either: the refusal leaves it out too."""
    with pytest.raises(ValueError, match=f"^base_url .*, got {re.escape(repr(shown))}$"):
        adapter(base_url=given, api_key="k")
    monkeypatch.setenv(variable, given)
    with pytest.raises(ValueError, match=f"^{variable} .*, got {re.escape(repr(shown))}$"):
        adapter(api_key="k")
