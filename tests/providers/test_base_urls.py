"""Base URLs: one no request could be sent to is refused when the adapter is built.

Given as ``base_url`` or through ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``,
a malformed URL is a ``ValueError`` naming where it came from and the value;
an empty variable counts as unset, so the service's own URL is used.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx2
import pytest

from retinue.providers import AuthenticationError, ProviderError
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel
from tests.helpers import ANTHROPIC_CREDENTIAL_VARIABLES
from tests.providers.support import collect, make_request

Adapter = type[OpenAIModel] | type[AnthropicModel]

ADAPTERS: list[tuple[Adapter, str]] = [
    (OpenAIModel, "OPENAI_BASE_URL"),
    (AnthropicModel, "ANTHROPIC_BASE_URL"),
]
ADAPTER_IDS = ["openai", "anthropic"]

MALFORMED = [
    "",
    "localhost:8000/v1",
    "127.0.0.1:8000",
    "/v1",
    "ftp://example.com/v1",
    "file:///tmp/socket",
    "https:///v1",
    "http://:8000/v1",
    "http://user@/v1",
    "http://[::1/v1",
    "http://example.com:99999/v1",
    "http://example.com:port/v1",
    "http://256.1.1.1/v1",
]
MALFORMED_IDS = [
    "empty",
    "no-scheme",
    "address-only",
    "path-only",
    "ftp",
    "file",
    "no-host",
    "port-only",
    "user-only",
    "unclosed-bracket",
    "port-out-of-range",
    "port-not-a-number",
    "bad-ipv4",
]
WITH_WHITESPACE = [" http://example.com/v1", "http://example.com/v1\n", "http://exa mple.com"]

WELL_FORMED = [
    "http://127.0.0.1:9/v1",
    "https://api.example.com/v1",
    "HTTPS://Example.com/v1",
    "http://[::1]:8000/v1",
    "http://mock/v1",
]


def _shown(url: str) -> str:
    """*url* as a refusal shows it: user information, which may be a key, left out."""
    return url.replace("user@", "...@")


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.parametrize(("adapter", "variable"), ADAPTERS, ids=ADAPTER_IDS)
@pytest.mark.parametrize("url", MALFORMED, ids=MALFORMED_IDS)
def test_malformed_base_url_is_refused_naming_the_parameter(
    monkeypatch: pytest.MonkeyPatch, adapter: Adapter, variable: str, url: str
) -> None:
    """A ``base_url`` with no http(s) scheme, no host or a bad port fails when the adapter is
    built, naming the parameter and the value: not on every request."""
    _clear(monkeypatch)
    monkeypatch.setenv(variable, "http://127.0.0.1:9")  # given, the parameter wins even empty
    expected = f"base_url must be an http:// or https:// URL, got {_shown(url)!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        adapter(base_url=url, api_key="k")


@pytest.mark.parametrize(("adapter", "variable"), ADAPTERS, ids=ADAPTER_IDS)
@pytest.mark.parametrize("url", [b"http://mock/v1", 7, ()], ids=["bytes", "int", "tuple"])
def test_a_base_url_that_is_no_str_is_refused_naming_the_parameter(
    monkeypatch: pytest.MonkeyPatch, adapter: Adapter, variable: str, url: object
) -> None:
    """A TypeError naming ``base_url`` and the value, not an AttributeError of the parser."""
    _clear(monkeypatch)
    expected = f"base_url must be None or a str, got {url!r}"
    with pytest.raises(TypeError, match=f"^{re.escape(expected)}$"):
        adapter(base_url=url, api_key="k")  # type: ignore[arg-type]


@pytest.mark.parametrize(("adapter", "variable"), ADAPTERS, ids=ADAPTER_IDS)
@pytest.mark.parametrize("url", MALFORMED[1:], ids=MALFORMED_IDS[1:])
def test_malformed_base_url_variable_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, adapter: Adapter, variable: str, url: str
) -> None:
    """The environment's base URL, taken when no ``base_url`` is given, is checked alike and
    named by its variable."""
    _clear(monkeypatch)
    monkeypatch.setenv(variable, url)
    expected = f"{variable} must be an http:// or https:// URL, got {_shown(url)!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        adapter(api_key="k")


@pytest.mark.parametrize(("adapter", "variable"), ADAPTERS, ids=ADAPTER_IDS)
@pytest.mark.parametrize("url", WITH_WHITESPACE, ids=["leading", "trailing", "inside"])
def test_base_url_with_whitespace_is_refused(
    monkeypatch: pytest.MonkeyPatch, adapter: Adapter, variable: str, url: str
) -> None:
    """Whitespace, which URL parsers strip or keep as they each see fit, is refused too,
    from the parameter or the variable."""
    _clear(monkeypatch)
    problem = "must be an http:// or https:// URL without whitespace or control characters"
    with pytest.raises(ValueError, match=f"^{re.escape(f'base_url {problem}, got {url!r}')}$"):
        adapter(base_url=url, api_key="k")
    monkeypatch.setenv(variable, url)
    with pytest.raises(ValueError, match=f"^{re.escape(f'{variable} {problem}, got {url!r}')}$"):
        adapter(api_key="k")


@pytest.mark.parametrize(("adapter", "variable"), ADAPTERS, ids=ADAPTER_IDS)
@pytest.mark.parametrize("url", WELL_FORMED)
async def test_well_formed_base_url_is_taken(
    monkeypatch: pytest.MonkeyPatch, adapter: Adapter, variable: str, url: str
) -> None:
    """An http(s) URL with a host, from the parameter or the variable, is what the client
    uses; given, the variable is not read at all."""
    _clear(monkeypatch)
    monkeypatch.setenv(variable, "localhost:8000")
    async with adapter(base_url=url, api_key="k") as given:
        assert given.base_url.lower().startswith(url.lower())
    monkeypatch.setenv(variable, url)
    async with adapter(api_key="k") as from_variable:
        assert from_variable.base_url.lower().startswith(url.lower())


async def test_empty_openai_base_url_variable_means_the_default_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``OPENAI_BASE_URL=`` counts as unset: requests go to OpenAI's own API, and without a
    key the adapter has no credentials (no placeholder key, as a local server gets)."""
    _clear(monkeypatch)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    async with OpenAIModel() as model:
        assert model.base_url == "https://api.openai.com/v1/"
        assert model.has_credentials is False


async def test_empty_anthropic_base_url_variable_means_the_default_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ANTHROPIC_BASE_URL=`` counts as unset: requests go to Anthropic's own API."""
    _clear(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "")
    async with AnthropicModel(api_key="k") as model:
        assert model.base_url.rstrip("/") == "https://api.anthropic.com"


@pytest.mark.parametrize(("adapter", "variable"), ADAPTERS, ids=ADAPTER_IDS)
@pytest.mark.parametrize(
    ("url", "placeholder"),
    [
        ("https://api.openai.com/v1", False),
        ("https://api.anthropic.com/v1", False),
        ("https://api.deepseek.com/v1", False),
        ("https://eu.api.openai.com/v1", False),
        ("http://localhost:8000/v1", True),
        ("https://llm.example.com/v1", True),
    ],
)
async def test_no_hosted_api_gets_the_placeholder_key(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    adapter: Adapter,
    variable: str,
    url: str,
    placeholder: bool,
) -> None:
    """Without a key, an adapter sends a placeholder to a compatible server, which may need
    none, and never to a provider's own API, whichever protocol it is reached by (Anthropic
    serves the Chat protocol, OpenAI neither's): there it has no credentials and fails
    ``MISSING_CREDENTIALS`` before sending, where a placeholder met a 401 from the server."""
    _clear_credentials(monkeypatch, tmp_path)
    async with adapter(base_url=url) as model:
        assert model.has_credentials is placeholder


def _clear_credentials(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    _clear(monkeypatch)
    for name in ("OPENAI_API_KEY", *ANTHROPIC_CREDENTIAL_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))  # no Anthropic profile on disk


def _anthropic_profile(directory: Path) -> None:
    """A signed-in Anthropic profile, as the SDK reads one: its token is ``PROFILE-TOKEN``."""
    for part, content in (
        ("configs", {"authentication": {"type": "user_oauth"}}),
        ("credentials", {"access_token": "PROFILE-TOKEN", "expires_at": int(time.time()) + 3600}),
    ):
        (directory / part).mkdir()
        path = directory / part / "default.json"
        path.write_text(json.dumps(content))
        path.chmod(0o600)


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        ("https://api.deepseek.com/anthropic", False),
        ("https://api.openai.com/v1", False),
        ("http://localhost:8000/anthropic", True),
    ],
)
async def test_an_anthropic_profile_serves_anthropics_api_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, sent: bool
) -> None:
    """The Anthropic SDK's own credentials (a profile on disk) never go to another host:
    another provider's API fails ``MISSING_CREDENTIALS`` with nothing sent, and a
    compatible server gets the placeholder, where the profile's token (and, expired,
    its refresh token) went to whichever host the adapter was pointed at."""
    _clear_credentials(monkeypatch, tmp_path)
    _anthropic_profile(tmp_path)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    seen: list[str] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(" ".join(f"{name}: {value}" for name, value in request.headers.items()))
        return httpx2.Response(
            401, json={"type": "error", "error": {"type": "authentication_error", "message": "no"}}
        )

    async with AnthropicModel(base_url=url, transport=httpx2.MockTransport(answer)) as model:
        assert model.has_credentials is sent
        with pytest.raises(ProviderError) as caught:
            await collect(model, make_request("hi"))
    if sent:
        assert isinstance(caught.value, AuthenticationError)
    else:
        assert caught.value.code == "MISSING_CREDENTIALS"
        assert f"missing credentials for {httpx2.URL(url).host}: " in str(caught.value)
        assert "profile serves Anthropic's own API alone" in str(caught.value)
    assert len(seen) == sent
    assert not any("PROFILE-TOKEN" in headers for headers in seen)
