"""An adapter refuses identity settings no request could be sent with, when it is built."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockServer
from retinue.providers.openai import OpenAIModel
from tests.providers.support import collect, make_request

BAD: dict[str, tuple[dict[str, Any], str]] = {
    "provider-empty": ({"provider": ""}, "provider"),
    "provider-int": ({"provider": 5}, "provider"),
    "headers-int": ({"default_headers": 5}, "default_headers"),
    "header-value-int": ({"default_headers": {"x-team": 5}}, "default_headers"),
    "key-int": ({"api_key": 5}, "api_key"),
    "transport-int": ({"transport": 7}, "transport"),
    "transport-without-aclose": ({"transport": EchoPolicy()}, "transport"),
}


@pytest.mark.parametrize("case", BAD)
@pytest.mark.parametrize("adapter", [OpenAIModel, AnthropicModel], ids=["openai", "anthropic"])
def test_adapters_refuse_identity_settings_of_another_type(adapter: Any, case: str) -> None:
    """A provider name that is no non-empty str, headers that are no str to str mapping,
    a key that is no str, or a transport that is none is a ``TypeError`` naming the
    setting, not a failure of every request (an untyped error from the HTTP client, or
    through the Anthropic SDK a connection error retried) or a lane no route names."""
    options, named = BAD[case]
    with pytest.raises(TypeError, match=f"^{named} must"):
        adapter(**{"base_url": "http://mock", "api_key": "k", **options})


@pytest.mark.parametrize("field", ["organization", "project"])
def test_openai_model_refuses_an_organization_or_project_that_is_no_str(field: str) -> None:
    """``organization`` and ``project`` go out as header values: text or nothing."""
    options: dict[str, Any] = {field: 42}
    with pytest.raises(TypeError, match=f"^{field} must be None or a str"):
        OpenAIModel(base_url="http://mock/v1", api_key="k", **options)


@pytest.mark.parametrize("api", ["messages", "chat", "responses"])
async def test_a_default_header_given_as_the_sdks_omit_marker_is_left_out(api: str) -> None:
    """Both SDKs take their ``Omit()`` as a header value that drops one of their default
    headers: it is not refused when the adapter is built, and the request goes out
    without that header and with the others."""
    omit = anthropic.Omit() if api == "messages" else openai.Omit()
    headers: Any = {"x-stainless-os": omit, "x-extra": "1"}
    server = MockServer(EchoPolicy())
    model: Any
    if api == "messages":
        model = AnthropicModel(
            base_url="http://mock",
            api_key="k",
            transport=server.transport(),
            default_headers=headers,
        )
    else:
        model = OpenAIModel(
            base_url="http://mock/v1",
            api_key="k",
            api="chat" if api == "chat" else "responses",
            transport=server.transport(),
            default_headers=headers,
        )
    async with model:
        await collect(model, make_request("hi"))
    sent = server.calls[0].headers
    assert "x-stainless-os" not in sent
    assert sent.get("x-extra") == "1"
