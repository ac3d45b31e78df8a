"""Settings an SDK sends as HTTP headers holding what no header carries (a line break,
whitespace at either end, a lone surrogate, a name that is no token) are refused when the adapter is built,
naming the setting, never the value (it may be a key)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel

KEY_WITH_NEWLINE = "sk-test-123\n"

ADAPTERS = [
    pytest.param(OpenAIModel, "http://mock/v1", "OPENAI_API_KEY", id="openai"),
    pytest.param(AnthropicModel, "http://mock", "ANTHROPIC_API_KEY", id="anthropic"),
]


@pytest.mark.parametrize(("adapter", "base_url", "variable"), ADAPTERS)
@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"api_key": KEY_WITH_NEWLINE}, "api_key holds the control character U+000A"),
        ({"api_key": " sk-test-123"}, "api_key starts or ends with whitespace"),
        (
            {"api_key": "k", "default_headers": {"X-Team": "a\r\nX-Other: b"}},
            "default_headers['X-Team'] holds the control character U+000D",
        ),
        (
            {"api_key": "k", "default_headers": {"X Team": "a"}},
            "header name 'X Team' is no HTTP token",
        ),
        ({"api_key": "k", "default_headers": {"": "a"}}, "header name '' is no HTTP token"),
        ({"api_key": "sk-\ud800"}, "api_key holds the lone surrogate U+D800 at position 3"),
        (
            {"api_key": "k", "default_headers": {"X-Team": "\udc80"}},
            "default_headers['X-Team'] holds the lone surrogate U+DC80",
        ),
    ],
    ids=[
        "key-newline",
        "key-space",
        "header-line-break",
        "name-space",
        "name-empty",
        "key-surrogate",
        "header-surrogate",
    ],
)
def test_a_header_text_no_http_header_carries_is_refused_when_built(
    adapter: Any, base_url: str, variable: str, options: dict[str, Any], named: str
) -> None:
    """Refused then, naming the setting: an adapter built with it would fail every
    request with ``CLIENT_ERROR``, its message naming no setting."""
    with pytest.raises(ValueError, match=re.escape(named)) as caught:
        adapter(base_url=base_url, **options)
    assert KEY_WITH_NEWLINE not in str(caught.value)


@pytest.mark.parametrize(("adapter", "base_url", "variable"), ADAPTERS)
def test_a_key_variable_with_its_newline_is_refused_naming_the_variable(
    adapter: Any, base_url: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key exported from a file's whole text names the variable it came from."""
    monkeypatch.setenv(variable, KEY_WITH_NEWLINE)
    with pytest.raises(ValueError, match=f"{variable} holds the control character U"):
        adapter(base_url=base_url)


def test_an_auth_token_variable_with_its_newline_is_refused_when_there_is_no_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a key the Anthropic SDK sends ``ANTHROPIC_AUTH_TOKEN`` as a bearer token."""
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", KEY_WITH_NEWLINE)
    with pytest.raises(ValueError, match="ANTHROPIC_AUTH_TOKEN holds the control character"):
        AnthropicModel(base_url="http://mock")


@pytest.mark.parametrize("key_from", ["api_key", "ANTHROPIC_API_KEY"])
def test_an_auth_token_variable_beside_a_key_is_never_read(
    key_from: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given a key, or ``ANTHROPIC_API_KEY``, the SDK reads no token: a stale one with its
    newline is never sent, so it does not stop the adapter from being built."""
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", KEY_WITH_NEWLINE)
    if key_from == "api_key":
        model = AnthropicModel(base_url="http://mock", api_key="k")
    else:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        model = AnthropicModel(base_url="http://mock")
    assert model._client.api_key == "k"
    assert model._client.auth_token is None


@pytest.mark.parametrize(("adapter", "base_url", "variable"), ADAPTERS)
def test_a_header_value_with_inner_spaces_and_tabs_is_taken(
    adapter: Any, base_url: str, variable: str
) -> None:
    """Spaces and tabs between a value's characters are HTTP's own."""
    adapter(base_url=base_url, api_key="k", default_headers={"X-Note": "a \tb"})
