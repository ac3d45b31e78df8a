"""Settings an SDK sends as HTTP headers are refused when built if no request could carry
them, naming the setting and the character, never the value (it may be a key)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from retinue._content import Text
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import MockServer
from retinue.providers.openai import OpenAIModel

from .support import collect, make_request

PASTED_KEY = "sk-proj-abc\N{NO-BREAK SPACE}"


@pytest.mark.parametrize(
    ("options", "named", "value"),
    [
        ({"api_key": PASTED_KEY}, "api_key", PASTED_KEY),
        (
            {"api_key": "k", "organization": "org-\N{ZERO WIDTH SPACE}1"},
            "organization",
            "org-\N{ZERO WIDTH SPACE}1",
        ),
        ({"api_key": "k", "project": "proj-é"}, "project", "proj-é"),
        (
            {"api_key": "k", "default_headers": {"X-Team": "café"}},
            "default_headers['X-Team']",
            "café",
        ),
        ({"api_key": "k", "default_headers": {"X-Tëam": "cafe"}}, "header name 'X-Tëam'", "cafe"),
    ],
    ids=["api-key", "organization", "project", "header-value", "header-name"],
)
def test_openai_model_refuses_a_header_text_beyond_ascii_when_built(
    options: dict[str, Any], named: str, value: str
) -> None:
    """A key pasted with a no-break space is refused when the adapter is built, not left
    to fail every request with ``CLIENT_ERROR``, its message an encoding error that names
    no setting. The value itself is never shown."""
    with pytest.raises(ValueError, match="only ASCII") as caught:
        OpenAIModel(base_url="http://mock/v1", **options)
    assert named in str(caught.value)
    assert value not in str(caught.value)


def test_openai_model_names_the_variable_a_key_beyond_ascii_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A key read from ``OPENAI_API_KEY`` is refused naming the variable."""
    monkeypatch.setenv("OPENAI_API_KEY", PASTED_KEY)
    with pytest.raises(ValueError, match="OPENAI_API_KEY holds NO-BREAK SPACE") as caught:
        OpenAIModel(base_url="http://mock/v1")
    assert PASTED_KEY not in str(caught.value)


@pytest.mark.parametrize("variable", ["OPENAI_ORG_ID", "OPENAI_PROJECT_ID"])
def test_openai_model_names_the_variable_an_identity_beyond_ascii_came_from(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """The SDK reads an organization or project not given from its variable: one beyond
    ASCII there is refused naming the variable."""
    monkeypatch.setenv(variable, "id-é")
    with pytest.raises(ValueError, match=f"{variable} holds LATIN SMALL LETTER E WITH ACUTE"):
        OpenAIModel(base_url="http://mock/v1", api_key="k")


def test_anthropic_model_refuses_a_header_name_beyond_ascii_when_built() -> None:
    """A header name no request can carry is refused when built, as OpenAI's is."""
    with pytest.raises(ValueError, match="header name 'X-Tëam'"):
        AnthropicModel(base_url="http://mock", api_key="k", default_headers={"X-Tëam": "1"})


async def test_anthropic_model_still_sends_a_header_value_beyond_ascii(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The Anthropic SDK sends a value beyond ASCII as it is: it is not refused."""
    server = MockServer()
    with trio.fail_after(60):
        async with AnthropicModel(
            base_url="http://mock",
            api_key="k",
            default_headers={"X-Team": "café"},
            transport=server.transport(),
        ) as model:
            collected = await collect(model, make_request("hi"))
    assert collected.message.content == (Text("You said: hi alpha bravo"),)
